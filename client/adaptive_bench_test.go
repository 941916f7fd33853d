package client_test

import (
	"context"
	"testing"

	"github.com/moonpool-go/moonpool/client"
)

// BenchmarkAdaptiveGate is Enter and Leave with room on an adaptive gate
// with room for 1,024, beside client.Gate's Enter and Leave, with every
// goroutine of RunParallel a caller. The bench's Adaptive suite sets it
// beside x/sync/semaphore.
func BenchmarkAdaptiveGate(b *testing.B) {
	eng := client.NewEngine()
	defer eng.Shutdown(context.Background())
	b.Run("adaptive", func(b *testing.B) {
		g, err := client.NewAdaptiveGate(eng, client.AdaptiveConfig{Min: 1024, Max: 4096, Start: 1024})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p, ok := g.TryEnter(ctx)
				if !ok {
					b.Error("no room")
					return
				}
				p.Leave()
			}
		})
	})
	b.Run("gate", func(b *testing.B) {
		g, err := client.NewGate(eng, 1024)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !g.Enter() {
					b.Error("no room")
					return
				}
				g.Leave()
			}
		})
	})
}
