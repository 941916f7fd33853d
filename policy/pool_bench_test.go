package policy

import (
	"testing"
	"time"
)

// benchConn is what the benchmarks pool: a pointer, as a real connection handle
// is, so the map hashes an address.
type benchConn struct{ id int }

// BenchmarkPoolTakeGive is the steady state of a busy pool: lend the idle
// resource, take it back.
func BenchmarkPoolTakeGive(b *testing.B) {
	p := NewPool[*benchConn](DefaultLimits, Ward{})
	c := &benchConn{1}
	p.Made(c, 0)
	p.Give(c, 0)
	var now int64
	b.ReportAllocs()
	for b.Loop() {
		now++
		got := p.Take(now)
		p.Give(got.Item, now)
	}
}

// BenchmarkPoolTakeGiveDeep lends and returns among a hundred idle ones.
func BenchmarkPoolTakeGiveDeep(b *testing.B) {
	p := NewPool[*benchConn](Limits{Size: 100, Idle: 100}, Ward{})
	for i := range 100 {
		c := &benchConn{i}
		p.Made(c, 0)
		p.Give(c, 0)
	}
	var now int64
	b.ReportAllocs()
	for b.Loop() {
		now++
		got := p.Take(now)
		p.Give(got.Item, now)
	}
}

// BenchmarkPoolMade is the make path: Take answers Make, Made registers
// the new resource, Drop lets it go.
func BenchmarkPoolMade(b *testing.B) {
	p := NewPool[*benchConn](DefaultLimits, Ward{})
	conns := make([]*benchConn, 8)
	for i := range conns {
		conns[i] = &benchConn{i}
	}
	var now int64
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		now++
		i++
		p.Take(now)
		c := conns[i%len(conns)]
		p.Made(c, now)
		p.Drop(c)
	}
}

// benchWard runs Take+Give of an idle resource, or Take+Made+Give when the
// ward lets a make through, with one ward part in place.
func benchWard(b *testing.B, w Ward, hot bool) {
	p := NewPool[*benchConn](DefaultLimits, w)
	c := &benchConn{1}
	p.Made(c, 0)
	p.Give(c, 0)
	if hot {
		p.Heat(0.9, 0)
	}
	var now int64
	b.ReportAllocs()
	for b.Loop() {
		now += int64(time.Microsecond)
		got := p.Take(now)
		switch got.Verdict {
		case Ready:
			p.Give(got.Item, now)
		case Make:
			p.Made(c, now)
			p.Give(c, now)
		}
	}
}

func BenchmarkPoolTakeBreaker(b *testing.B) {
	benchWard(b, Ward{Breaker: Throttle{K: 2}}, false)
}

func BenchmarkPoolTakeBucket(b *testing.B) {
	benchWard(b, Ward{Bucket: Rate{PerSecond: 1e9, Burst: 1e9}}, false)
}

func BenchmarkPoolTakeBackoff(b *testing.B) {
	benchWard(b, Ward{Backoff: Backoff{Base: time.Millisecond, Factor: 2, Jitter: Full}}, false)
}

// BenchmarkPoolTakeShedder runs with the process reported hot, so every
// Take asks the shedder's Little's-law limit.
func BenchmarkPoolTakeShedder(b *testing.B) {
	benchWard(b, Ward{Shedder: Overload{Hot: 0.8}}, true)
}

func BenchmarkPoolTakeWard(b *testing.B) {
	benchWard(b, Ward{
		Breaker: Throttle{K: 2},
		Bucket:  Rate{PerSecond: 1e9, Burst: 1e9},
		Backoff: Backoff{Base: time.Millisecond, Factor: 2, Jitter: Full},
		Shedder: Overload{Hot: 0.8},
		Draw:    func() float64 { return 0.5 },
	}, true)
}

// benchMake is the make path through one ward part: Take answers Make (the
// ward consulted), Made, Drop.
func benchMake(b *testing.B, w Ward) {
	p := NewPool[*benchConn](DefaultLimits, w)
	c := &benchConn{1}
	var now int64
	b.ReportAllocs()
	for b.Loop() {
		now += int64(time.Microsecond)
		if p.Take(now).Verdict == Make {
			p.Made(c, now)
			p.Drop(c)
		}
	}
}

func BenchmarkPoolMadeBreaker(b *testing.B) { benchMake(b, Ward{Breaker: Throttle{K: 2}}) }

func BenchmarkPoolMadeBucket(b *testing.B) {
	benchMake(b, Ward{Bucket: Rate{PerSecond: 1e9, Burst: 1e9}})
}

func BenchmarkPoolMadeBackoff(b *testing.B) {
	benchMake(b, Ward{Backoff: Backoff{Base: time.Millisecond, Factor: 2, Jitter: Full}})
}

func BenchmarkPoolMadeShedder(b *testing.B) { benchMake(b, Ward{Shedder: Overload{Hot: 0.8}}) }

func BenchmarkBreakerAllow(b *testing.B) {
	br := NewBreaker(2, time.Minute)
	var now int64
	b.ReportAllocs()
	for b.Loop() {
		now += int64(time.Millisecond)
		if br.Allow(now) {
			br.Success(now)
		}
	}
}

func BenchmarkShedderAllow(b *testing.B) {
	s := NewShedder(0.8, time.Second)
	s.Heat(0.9, 0)
	var now int64
	b.ReportAllocs()
	for b.Loop() {
		now += int64(time.Microsecond)
		if s.Allow(now, 2) {
			s.Done(now, time.Microsecond)
		}
	}
}
