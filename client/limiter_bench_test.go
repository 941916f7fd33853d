package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
)

// spread runs op b.N times in all across g goroutines.
func spread(b *testing.B, g int, op func()) {
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range g {
		n := b.N / g
		if i < b.N%g {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				op()
			}
		}()
	}
	wg.Wait()
}

var benchGoroutines = []int{1, 8, 64, 512}

// BenchmarkBucketAllow: Allow on one bucket from g goroutines at once, on
// the real clock. The bucket is large enough that most calls are granted.
func BenchmarkBucketAllow(b *testing.B) {
	for _, g := range benchGoroutines {
		b.Run(fmt.Sprint("goroutines=", g), func(b *testing.B) {
			eng := engine.New()
			defer eng.Shutdown(context.Background())
			bk, err := client.NewBucket(eng, 1e9, 1e6)
			if err != nil {
				b.Fatal(err)
			}
			spread(b, g, func() { bk.Allow() })
		})
	}
}

// BenchmarkGateEnterLeave: Enter, then Leave when let in, on one gate from
// g goroutines at once. The limit is above g, so every Enter is let in.
func BenchmarkGateEnterLeave(b *testing.B) {
	for _, g := range benchGoroutines {
		b.Run(fmt.Sprint("goroutines=", g), func(b *testing.B) {
			eng := engine.New()
			defer eng.Shutdown(context.Background())
			gate, err := client.NewGate(eng, 1024)
			if err != nil {
				b.Fatal(err)
			}
			spread(b, g, func() {
				if gate.Enter() {
					gate.Leave()
				}
			})
		})
	}
}

// BenchmarkKeyedNewKeys: Allow of a key not seen before, every call, from
// one goroutine, on a keyed bucket that never forgets while it runs.
func BenchmarkKeyedNewKeys(b *testing.B) {
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = fmt.Sprint("client-", i)
	}
	eng := engine.New()
	defer eng.Shutdown(context.Background())
	k, err := client.NewKeyedBucket(eng, 0.01, 10)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, key := range keys {
		k.Allow(key)
	}
}

// BenchmarkWindowAllow: Allow on one window from g goroutines at once, on
// the real clock, as the bench's: a million events a millisecond.
func BenchmarkWindowAllow(b *testing.B) {
	for _, g := range benchGoroutines {
		b.Run(fmt.Sprint("goroutines=", g), func(b *testing.B) {
			eng := engine.New()
			defer eng.Shutdown(context.Background())
			w, err := client.NewWindow(eng, 1_000_000, time.Millisecond)
			if err != nil {
				b.Fatal(err)
			}
			spread(b, g, func() { w.Allow() })
		})
	}
}

// BenchmarkBucketAllowExact: Allow on a bucket too small to lend tokens
// ahead of time, so every call asks the actor.
func BenchmarkBucketAllowExact(b *testing.B) {
	for _, g := range benchGoroutines {
		b.Run(fmt.Sprint("goroutines=", g), func(b *testing.B) {
			eng := engine.New()
			defer eng.Shutdown(context.Background())
			bk, err := client.NewBucket(eng, 1e9, 8)
			if err != nil {
				b.Fatal(err)
			}
			spread(b, g, func() { bk.Allow() })
		})
	}
}

// BenchmarkBucketWait: Wait on a bucket that refills every nanosecond, so
// most calls are granted at once and a few park.
func BenchmarkBucketWait(b *testing.B) {
	for _, g := range benchGoroutines {
		b.Run(fmt.Sprint("goroutines=", g), func(b *testing.B) {
			eng := engine.New()
			defer eng.Shutdown(context.Background())
			bk, err := client.NewBucket(eng, 1e9, 8)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			spread(b, g, func() {
				if err := bk.Wait(ctx); err != nil {
					b.Error(err)
				}
			})
		})
	}
}

// BenchmarkBucketTokens: Tokens, which asks the actor every call.
func BenchmarkBucketTokens(b *testing.B) {
	eng := engine.New()
	defer eng.Shutdown(context.Background())
	bk, err := client.NewBucket(eng, 1e9, 8)
	if err != nil {
		b.Fatal(err)
	}
	spread(b, 1, func() { bk.Tokens() })
}

// BenchmarkGateEnterExact: Enter, then Leave when let in, on a gate too
// small to lend room ahead of time, so every Enter asks the actor.
func BenchmarkGateEnterExact(b *testing.B) {
	for _, g := range []int{1, 8} {
		b.Run(fmt.Sprint("goroutines=", g), func(b *testing.B) {
			eng := engine.New()
			defer eng.Shutdown(context.Background())
			gate, err := client.NewGate(eng, 8)
			if err != nil {
				b.Fatal(err)
			}
			spread(b, g, func() {
				if gate.Enter() {
					gate.Leave()
				}
			})
		})
	}
}
