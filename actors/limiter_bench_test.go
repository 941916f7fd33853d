package actors

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/moontest"
)

// BenchmarkAllow measures one request's round trip — send, decide, answer
// on the caller's channel — with 1 and 8 callers, each reusing its request
// and channel as a client does. Time is the engine's real clock, read once
// a request.
func BenchmarkAllow(b *testing.B) {
	names := make([]string, 1024)
	for i := range names {
		names[i] = "key-" + strconv.Itoa(i)
	}
	kinds := []struct {
		name  string
		spawn func(*engine.Engine) (*engine.Ref, error)
		op    func(e *engine.Engine, ref *engine.Ref, caller int) func(i int)
	}{
		{"bucket", func(e *engine.Engine) (*engine.Ref, error) { return SpawnBucket(e, "", 1e9, 1e6) }, allowOp(nil)},
		{"window", func(e *engine.Engine) (*engine.Ref, error) { return SpawnWindow(e, "", 1<<20, time.Millisecond) }, allowOp(nil)},
		{"keyed", func(e *engine.Engine) (*engine.Ref, error) { return SpawnKeyedBucket(e, "", 1e3, 1e6) }, allowOp(names)},
		{"keyed-churn", func(e *engine.Engine) (*engine.Ref, error) { return SpawnKeyedBucket(e, "", 1e9, 1e6) }, allowOp(names)},
		{"gate", func(e *engine.Engine) (*engine.Ref, error) { return SpawnGate(e, "", 4) }, gateOp},
	}
	for _, k := range kinds {
		for _, callers := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/callers=%d", k.name, callers), func(b *testing.B) {
				e := engine.New(engine.WithHeatEvery(0))
				defer e.Shutdown(context.Background())
				ref, err := k.spawn(e)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				var wg sync.WaitGroup
				for c := range callers {
					n := b.N / callers
					if c < b.N%callers {
						n++
					}
					op := k.op(e, ref, c)
					wg.Go(func() {
						for i := range n {
							op(i)
						}
					})
				}
				wg.Wait()
			})
		}
	}
}

// allowOp is a caller sending Allows, for keys in turn if there are any.
func allowOp(keys []string) func(*engine.Engine, *engine.Ref, int) func(int) {
	return func(e *engine.Engine, ref *engine.Ref, caller int) func(int) {
		a := &Allow{N: 1, Reply: make(chan Permit, 1)}
		return func(i int) {
			a.Now = e.Now()
			if keys != nil {
				a.Key = keys[(caller*131+i)%len(keys)]
			}
			ref.Send(a)
			<-a.Reply
		}
	}
}

// gateOp is a caller entering and, when let in, leaving.
func gateOp(_ *engine.Engine, ref *engine.Ref, _ int) func(int) {
	m := &Enter{Reply: make(chan Permit, 1)}
	leave := &Leave{}
	return func(int) {
		ref.Send(m)
		if p := <-m.Reply; p.OK {
			ref.Send(leave)
		}
	}
}

// BenchmarkKeyedMemory fills a keyed bucket with a million keys that stay
// (an hour to refill) and reports what each costs the actor, not counting
// the bytes of the key strings themselves, which the caller holds anyway.
// Run it with -benchtime=1x: each iteration is the whole million.
func BenchmarkKeyedMemory(b *testing.B) {
	const million = 1_000_000
	names := make([]string, million)
	for i := range names {
		names[i] = "api-key-" + strconv.Itoa(i)
	}
	for _, kind := range []string{"bucket", "window"} {
		b.Run(kind, func(b *testing.B) {
			var perKey float64
			for range b.N {
				v := moontest.NewClock(b)
				e := engine.New(engine.WithClock(v), engine.WithHeatEvery(0))
				var ref *engine.Ref
				var err error
				if kind == "bucket" {
					ref, err = SpawnKeyedBucket(e, "", 1.0/3600, 1)
				} else {
					ref, err = SpawnKeyedWindow(e, "", 10, time.Hour)
				}
				if err != nil {
					b.Fatal(err)
				}
				before := heap()
				a := &Allow{Now: v.Now(), N: 1, Reply: make(chan Permit, 1)}
				for _, name := range names {
					a.Key = name
					ref.Send(a)
					if p := <-a.Reply; !p.OK {
						b.Fatalf("%s: %+v", name, p)
					}
				}
				if n := keys(ref); n != million {
					b.Fatalf("%d keys held, want %d", n, million)
				}
				perKey = float64(heap()-before) / million
				e.Shutdown(context.Background())
			}
			b.ReportMetric(perKey, "bytes/key")
		})
	}
}

// heap is the live heap after a collection.
func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
