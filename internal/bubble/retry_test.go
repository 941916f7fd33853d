package bubble_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

var errFlaky = errors.New("flaky")

// rigid is a backoff without jitter: 1s, 2s, 4s between four attempts.
var rigid = policy.Backoff{Base: time.Second, Factor: 2, Attempts: 4, Jitter: policy.Rigid}

// TestRetry: Retry sleeps the backoff's delays on the bubble's clock,
// whether it sleeps on the real clock or on the engine's.
func TestRetry(t *testing.T) {
	inBubbles(t, func(t *testing.T, eng *engine.Engine) {
		for _, opts := range [][]client.RetryOption{nil, {client.SleepOn(eng.Clock())}} {
			start := time.Now()
			var at []time.Duration
			err := client.Retry(context.Background(), rigid, func(context.Context) error {
				at = append(at, time.Since(start))
				if len(at) < 4 {
					return errFlaky
				}
				return nil
			}, opts...)
			must(t, err)
			want := []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second}
			if !slices.Equal(at, want) {
				t.Fatalf("attempts at %v, want %v", at, want)
			}
		}
	})
}

// TestRetryHint: a server's hint of an hour is slept, spread over at most
// a tenth of it, never less.
func TestRetryHint(t *testing.T) {
	inBubbles(t, func(t *testing.T, eng *engine.Engine) {
		calls := 0
		got := took(func() {
			must(t, client.Retry(context.Background(), rigid, func(context.Context) error {
				if calls++; calls == 1 {
					return client.RetryAfter(errFlaky, time.Hour)
				}
				return nil
			}))
		})
		if got < time.Hour || got > time.Hour+6*time.Minute {
			t.Fatalf("told to come back in 1h, Retry slept %v", got)
		}
	})
}

// TestRetryDeadline: a sleep that would pass ctx's deadline is not slept.
func TestRetryDeadline(t *testing.T) {
	inBubbles(t, func(t *testing.T, eng *engine.Engine) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		var err error
		got := took(func() {
			err = client.Retry(ctx, rigid, func(context.Context) error { return errFlaky })
		})
		var re *client.RetryError
		if got != 0 || !errors.As(err, &re) || re.Attempts != 1 || !errors.Is(err, client.ErrExceedsDeadline) {
			t.Fatalf("Retry = %v after %v, want a *RetryError of 1 attempt past the deadline, at once", err, got)
		}
	})
}
