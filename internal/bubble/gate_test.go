package bubble_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
)

// TestGate: a gate lets exactly its limit in at once, with room lent ahead
// of time (32) and without (3), and a caller's Leave makes room for the
// next.
func TestGate(t *testing.T) {
	for _, limit := range []int{3, 32} {
		t.Run(fmt.Sprint("limit", limit), func(t *testing.T) {
			inBubbles(t, func(t *testing.T, eng *engine.Engine) {
				g, err := client.NewGate(eng, limit)
				must(t, err)
				in := 0
				for g.Enter() {
					if in++; in > limit {
						t.Fatalf("limit %d: more than the limit let in", limit)
					}
				}
				if in != limit || g.Held() != limit {
					t.Fatalf("limit %d: %d let in, Held %d", limit, in, g.Held())
				}
				// A caller inside for a second of fake time, then out.
				go func() {
					time.Sleep(time.Second)
					g.Leave()
				}()
				synctest.Wait()
				if g.Enter() {
					t.Fatalf("limit %d: let in before anyone left", limit)
				}
				time.Sleep(time.Second)
				synctest.Wait()
				if !g.Enter() {
					t.Fatalf("limit %d: no room after a Leave", limit)
				}
				must(t, g.Close(context.Background()))
				if g.Enter() || g.Held() != 0 {
					t.Fatalf("limit %d: a closed gate still answers", limit)
				}
			})
		})
	}
}
