package moonredis

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/redis/go-redis/v9"
)

// TestInBubbles: a limiter works inside a synctest bubble, its Wait
// sleeping on the bubble's clock, and so does another in a second bubble
// of the same test binary: nothing a limiter
// keeps (its asks' channels among them) passes from one bubble to the
// other, which the runtime would stop the binary for. The miniredis runs
// outside the bubbles, since a goroutine waiting on the network is never
// durably blocked.
func TestInBubbles(t *testing.T) {
	mr := miniredis.RunT(t)
	for round := range 3 {
		synctest.Test(t, func(t *testing.T) {
			eng := engine.New()
			rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), PoolSize: 1})
			defer rdb.Close()
			cfg := Config{Client: rdb, Prefix: "bubble:b:", Timeout: time.Minute}
			b, err := NewBucket(eng, cfg, 1.0/3600, 2) // Redis's clock is real: no token comes back in the test
			if err != nil {
				t.Fatal(err)
			}
			cfg.Prefix = "bubble:w:"
			w, err := NewWindow(eng, cfg, 2, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			key := string(rune('a' + round))
			for i := range 3 {
				if got, want := b.Allow(key), i < 2; got != want {
					t.Errorf("round %d: bucket Allow %d = %v, want %v", round, i, got, want)
				}
				if got, want := w.Allow(key), i < 2; got != want {
					t.Errorf("round %d: window Allow %d = %v, want %v", round, i, got, want)
				}
			}
			if got := b.Tokens(key); got >= 0.01 {
				t.Errorf("round %d: Tokens = %v, want 0", round, got)
			}
			// A Wait sleeps on the bubble's clock: an hour, at once.
			start := time.Now()
			if err := b.Wait(context.Background(), key); err != nil {
				t.Errorf("round %d: Wait = %v", round, err)
			}
			if slept := time.Since(start); slept < 59*time.Minute {
				t.Errorf("round %d: Wait for a token an hour away slept %v", round, slept)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if err := eng.Shutdown(ctx); err != nil {
				t.Errorf("round %d: engine shutdown: %v", round, err)
			}
		})
	}
}
