package main

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/moonpool-go/moonpool/engine"
)

// The comparisons of `go run ./bench` as ordinary benchmarks, so two runs
// can be set side by side with benchstat:
//
//	go test -run '^$' -bench . -benchmem -count 10 ./bench > new.txt
//	benchstat old.txt new.txt
//
// Each builds the same contender as the command, so the work per
// operation is the same; the command alternates the sides, these do not.

var benchCallers = []int{1, 8, 64, 512}

// spread runs c b.N times in all across callers goroutines at once.
func spread(b *testing.B, callers int, c contender) {
	b.Helper()
	defer c.close()
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range callers {
		n := b.N / callers
		if i < b.N%callers {
			n++
		}
		wg.Go(func() { c.run(n) })
	}
	wg.Wait()
	b.StopTimer()
	if c.errs != nil && c.errs() > 0 {
		b.Fatalf("%d operations failed", c.errs())
	}
}

// withEngine runs f with an engine on the real clock, shut down after.
func withEngine(b *testing.B, f func(eng *engine.Engine)) {
	eng := engine.New()
	defer eng.Shutdown(context.Background())
	f(eng)
}

func must(b *testing.B, c contender, err error) contender {
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkPool is Get+Put on a pool kept full: moonpool, puddle, and a
// buffered channel (the floor).
func BenchmarkPool(b *testing.B) {
	for _, kind := range []string{"ours", "puddle", "chan"} {
		for _, size := range []int{10, 1000} {
			for _, callers := range benchCallers {
				b.Run(fmt.Sprintf("%s/size=%d/callers=%d", kind, size, callers), func(b *testing.B) {
					withEngine(b, func(eng *engine.Engine) {
						var c contender
						var err error
						switch kind {
						case "ours":
							c, err = oursPool(eng, size)
						case "puddle":
							c, err = puddlePool(size)
						default:
							c = chanPool(size)
						}
						spread(b, callers, must(b, c, err))
					})
				})
			}
		}
	}
}

// BenchmarkRate is Allow on one limiter that allows (almost) everything.
func BenchmarkRate(b *testing.B) {
	for _, kind := range []string{"ours", "rate"} {
		for _, callers := range benchCallers {
			b.Run(fmt.Sprintf("%s/callers=%d", kind, callers), func(b *testing.B) {
				withEngine(b, func(eng *engine.Engine) {
					if kind == "ours" {
						c, err := oursRate(eng)
						spread(b, callers, must(b, c, err))
						return
					}
					spread(b, callers, theirRate())
				})
			})
		}
	}
}

// BenchmarkGate is Enter+Leave against semaphore TryAcquire+Release.
func BenchmarkGate(b *testing.B) {
	for _, kind := range []string{"ours", "semaphore"} {
		for _, callers := range benchCallers {
			b.Run(fmt.Sprintf("%s/callers=%d", kind, callers), func(b *testing.B) {
				withEngine(b, func(eng *engine.Engine) {
					if kind == "ours" {
						c, err := oursGate(eng)
						spread(b, callers, must(b, c, err))
						return
					}
					spread(b, callers, theirGate())
				})
			})
		}
	}
}

// BenchmarkCore is the pure core on one goroutine, time handed in, against
// a buffered channel (pool) and rate.Limiter.AllowN(t, 1) (limits).
func BenchmarkCore(b *testing.B) {
	cases := []struct {
		name  string
		build func() contender
	}{
		{"ours/pool", corePool},
		{"chan/pool", func() contender { return chanPool(10) }},
		{"ours/bucket", coreBucket},
		{"rate/allowN", coreAllowN},
		{"ours/window/allow=10", func() contender { return coreWindow(10) }},
		{"ours/window/allow=1000000", func() contender { return coreWindow(1_000_000) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) { spread(b, 1, c.build()) })
	}
}
