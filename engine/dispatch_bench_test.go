package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// echo answers every *ping on its channel: the bare round trip.
type ping struct{ reply chan struct{} }

func (p *ping) Refuse() { p.reply <- struct{}{} }

type echo struct{}

func (echo) Receive(c actor.Context) {
	if p, ok := c.Message().(*ping); ok {
		p.reply <- struct{}{}
	}
}

// BenchmarkDispatch measures a send-and-reply round trip through each
// dispatch at 1, 8, 64 and 512 callers, with the p99 of a single call.
func BenchmarkDispatch(b *testing.B) {
	type setting struct {
		d      scheduling
		budget int
	}
	for _, s := range []setting{{hybrid, 1}, {hybrid, 4}, {hybrid, 16}, {dedicated, 1}, {stock, 1}, {synchronized, 1}} {
		for _, callers := range []int{1, 8, 64, 512} {
			name := s.d.String()
			if s.d == hybrid {
				name = fmt.Sprintf("%s%d", name, s.budget)
			}
			b.Run(fmt.Sprintf("%s/callers=%d", name, callers), func(b *testing.B) {
				e := New(withDispatch(s.d, s.budget))
				defer e.Shutdown(context.Background())
				ref, err := e.Spawn("", echo{}, nil)
				if err != nil {
					b.Fatal(err)
				}
				roundTrips(b, callers, func(p *ping) {
					ref.Send(p)
					<-p.reply
				})
			})
		}
	}
}

// direct is echo as a Handler answering on a Reply: the path moonpool's
// own actors take.
type direct struct{}

func (direct) Receive(actor.Context) {}

func (direct) Handle(msg any) {
	if s, ok := msg.(*seq); ok {
		s.reply.Put(s.n)
	}
}

// BenchmarkDirect is the round trip of BenchmarkDispatch for a Handler
// answering on a Reply, under hybrid with the default budget and with a
// budget of 1.
func BenchmarkDirect(b *testing.B) {
	for _, budget := range []int{defaultBudget, 1} {
		for _, callers := range []int{1, 8, 64, 512} {
			b.Run(fmt.Sprintf("hybrid%d/callers=%d", budget, callers), func(b *testing.B) {
				e := New(withDispatch(hybrid, budget))
				defer e.Shutdown(context.Background())
				ref, err := e.Spawn("", direct{}, nil)
				if err != nil {
					b.Fatal(err)
				}
				var pool sync.Pool
				roundTrips(b, callers, func(*ping) {
					s, _ := pool.Get().(*seq)
					if s == nil {
						s = new(seq)
					}
					s.reply.Ask(ref, s)
					s.reply.Await(ref, nil)
					s.reply.Take()
					pool.Put(s)
				})
			})
		}
	}
}

// BenchmarkProtoactorStock is the same round trip through protoactor's own
// mailbox and default dispatcher, untouched: the baseline.
func BenchmarkProtoactorStock(b *testing.B) {
	for _, callers := range []int{1, 8, 64, 512} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			e := New()
			defer e.Shutdown(context.Background())
			pid := e.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return echo{} }))
			defer e.system.Root.Stop(pid)
			roundTrips(b, callers, func(p *ping) {
				e.system.Root.Send(pid, p)
				<-p.reply
			})
		})
	}
}

func roundTrips(b *testing.B, callers int, call func(*ping)) {
	b.ReportAllocs()
	per := b.N/callers + 1
	lat := make([][]time.Duration, callers)
	var wg sync.WaitGroup
	b.ResetTimer()
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &ping{reply: make(chan struct{}, 1)}
			l := make([]time.Duration, 0, per)
			for range per {
				t := time.Now()
				call(p)
				l = append(l, time.Since(t))
			}
			lat[g] = l
		}()
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(all[len(all)-1].Nanoseconds()), "max-ns")
}
