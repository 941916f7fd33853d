package moonredis

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
)

// TestRemembersRefusal: once Redis refuses an Allow of a key, Allow and
// Try of that key are refused in this process, with the rest of the wait
// Redis gave, and no call, until that wait has passed; then the next goes
// to Redis and is let through. Other keys, a look (Delay) and Wait still
// ask Redis. For the bucket, the exact window and the approximate one.
func TestRemembersRefusal(t *testing.T) {
	for _, kind := range []string{"bucket", "window", "approx"} {
		t.Run(kind, func(t *testing.T) {
			f := newFake(t)
			var lim client.KeyedLimiter
			var stats func() Stats
			var l *limiter
			switch kind {
			case "bucket":
				b, err := NewBucket(f.eng, f.cfg(), 1, 2) // a token a second, bursts of 2
				if err != nil {
					t.Fatal(err)
				}
				lim, stats, l = b, b.Stats, &b.l
			default:
				newW := NewWindow
				if kind == "approx" {
					newW = NewApproxWindow
				}
				w, err := newW(f.eng, f.cfg(), 2, time.Second)
				if err != nil {
					t.Fatal(err)
				}
				lim, stats, l = w, w.Stats, &w.l
			}
			for i := range 2 {
				if !lim.Allow("k") {
					t.Fatalf("a fresh limit of 2 refused its Allow %d", i)
				}
			}
			first := lim.Try("k")
			if first.OK {
				t.Fatal("the third in the same instant was let through")
			}
			calls := stats().Calls
			f.advance(100 * time.Millisecond)
			d := lim.Try("k")
			if d.OK || d.Wait != first.Wait-100*time.Millisecond {
				t.Errorf("Try 100ms after a refusal with Wait %v = %+v, want a refusal with the rest of it", first.Wait, d)
			}
			if lim.Allow("k") {
				t.Error("Allow let through what Redis refused a moment ago")
			}
			if st := stats(); st.Calls != calls || st.Remembered != 2 {
				t.Errorf("Stats = %+v, want no call since the refusal (%d) and 2 remembered", st, calls)
			}
			if !lim.Allow("other") {
				t.Error("another key was refused with k")
			}
			if lim.Delay("k") <= 0 {
				t.Error("Delay of a refused key is 0")
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			if err := lim.Wait(ctx, "k"); err == nil {
				t.Error("Wait with a millisecond to go was let through while k is refused")
			}
			cancel()
			// A Wait whose ctx ends first leaves its call out. Were the
			// clock moved before the call lands, Redis would run it
			// later, and might give it a slot in what it has left.
			waitFor(t, "the Wait's call to land", func() bool { return l.flying.Load() == 0 })
			if st := stats(); st.Calls != calls+3 {
				t.Errorf("%d calls for another key's Allow, a Delay and a Wait, want 3", st.Calls-calls)
			}
			if b, ok := lim.(*Bucket); ok {
				calls = stats().Calls
				if b.AllowN("k", 2) {
					t.Error("AllowN of 2 let through while a refusal of 1 stands")
				}
				if st := stats(); st.Calls != calls {
					t.Error("AllowN of 2 asked Redis while a refusal of 1 stands")
				}
				b.TryN("k", 0.5) // less than the one refused: Redis decides
				if st := stats(); st.Calls != calls+1 {
					t.Error("TryN of half a token was refused from a refusal of one")
				}
				calls = stats().Calls - 3 // the final count below adds the three calls above
			}
			f.advance(first.Wait - 100*time.Millisecond)
			if !lim.Allow("k") {
				t.Error("once the refusal's wait had passed, the next Allow was refused")
			}
			if st := stats(); st.Calls != calls+4 {
				t.Errorf("the Allow after the wait made %d calls, want 1", st.Calls-calls-3)
			}
		})
	}
}

// TestRememberedOnlyWhatRedisRefuses: under random arrivals on a shared
// bucket, exact window and approximate window, from this limiter and
// another that takes from the same keys (another process), by Allow and
// by Wait, every refusal answered without a call is one Redis gives too:
// a look at that instant says the key would wait.
func TestRememberedOnlyWhatRedisRefuses(t *testing.T) {
	for _, kind := range []string{"bucket", "window", "approx"} {
		t.Run(kind, func(t *testing.T) {
			f := newFake(t)
			var a, b client.KeyedLimiter
			var stats func() Stats
			if kind == "bucket" {
				x, err := NewBucket(f.eng, f.cfg(), 5, 3)
				if err != nil {
					t.Fatal(err)
				}
				y, err := NewBucket(f.eng, f.cfg(), 5, 3)
				if err != nil {
					t.Fatal(err)
				}
				a, b, stats = x, y, x.Stats
			} else {
				newW := NewWindow
				if kind == "approx" {
					newW = NewApproxWindow
				}
				x, err := newW(f.eng, f.cfg(), 3, 700*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				y, err := newW(f.eng, f.cfg(), 3, 700*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				a, b, stats = x, y, x.Stats
			}
			r := rand.New(rand.NewPCG(1, 2))
			keys := []string{"k0", "k1", "k2"}
			var waiters sync.WaitGroup
			defer wakeAll(t, f, &waiters)
			for step := range 1500 {
				key := keys[r.IntN(len(keys))]
				switch r.IntN(6) {
				case 0, 1:
					b.Allow(key)
				case 2: // a Wait that may take a slot ahead
					ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
					waiters.Go(func() { defer cancel(); b.Wait(ctx, key) })
				}
				before := stats().Remembered
				ok := a.Allow(key)
				if stats().Remembered > before {
					if ok {
						t.Fatalf("step %d: a remembered refusal let %s through", step, key)
					}
					if a.Delay(key) <= 0 {
						t.Fatalf("step %d: refused %s without a call, but Redis would let it through now", step, key)
					}
				}
				f.advance(time.Duration(r.IntN(120)) * time.Millisecond)
			}
			if st := stats(); st.Remembered == 0 {
				t.Errorf("Stats = %+v: no refusal was remembered, the test shows nothing", st)
			}
		})
	}
}

// TestRememberBounded: the keys remembered stay at most maxOver; when
// full, the expired ones are swept, and a refusal finding no room is not
// remembered, with a sweep at most once in maxOver such refusals.
func TestRememberBounded(t *testing.T) {
	f := newFake(t)
	o := &owner{l: &limiter{eng: f.eng}, over: make(map[string]int64)}
	now := f.eng.Now()
	refused := verdict{wait: time.Second}
	fill := func(until int64) {
		clear(o.over)
		for i := range maxOver {
			o.over["full"+strconv.Itoa(i)] = until
		}
	}
	fill(now) // expired: swept
	o.remember(&ask{key: "new", n: 1}, refused, now)
	if len(o.over) != 1 || o.over["new"] != now+int64(time.Second) {
		t.Fatalf("remembered %d keys after a sweep of expired ones, want the new one alone", len(o.over))
	}
	fill(now + int64(time.Hour)) // none expired
	o.sweep = 0
	o.remember(&ask{key: "new", n: 1}, refused, now)
	if len(o.over) != maxOver {
		t.Fatalf("remembered %d keys, want at most %d", len(o.over), maxOver)
	}
	if o.sweep != maxOver {
		t.Fatalf("after a sweep that freed nothing, the next is %d refusals away, want %d", o.sweep, maxOver)
	}
	o.remember(&ask{key: "newer", n: 1}, refused, now)
	if o.sweep != maxOver-1 {
		t.Errorf("a refusal within the sweep's pause swept again")
	}
	for _, a := range []*ask{{key: "w", n: 1, wait: true}, {key: "l", n: 1, look: true}, {key: "n", n: 2}} {
		clear(o.over)
		o.remember(a, refused, now)
		if len(o.over) != 0 {
			t.Errorf("remembered a refusal of %s (n %v, wait %v, look %v): only an Allow or Try of one is", a.key, a.n, a.wait, a.look)
		}
	}
}
