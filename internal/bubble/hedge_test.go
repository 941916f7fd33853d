package bubble_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/moonhttp"
)

// lagging is a backend that answers each request after lag, or with 503
// at once while down, and counts what it is sent. A request cancelled
// before its answer fails with its ctx's error.
type lagging struct {
	mu   sync.Mutex
	lag  func(n int) time.Duration
	down bool
	sent int
}

func (l *lagging) RoundTrip(r *http.Request) (*http.Response, error) {
	l.mu.Lock()
	l.sent++
	n, down := l.sent, l.down
	l.mu.Unlock()
	code := http.StatusOK
	if down {
		code = http.StatusServiceUnavailable
	} else {
		timer := time.NewTimer(l.lag(n))
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return &http.Response{StatusCode: code, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

// TestTransportBudget: a Transport under a budget hedges a slow GET once
// the budget has learned the backend's latency, at its 95th percentile.
// In an outage it retries only within the budget, whatever its Attempts.
func TestTransportBudget(t *testing.T) {
	inBubbles(t, func(t *testing.T, eng *engine.Engine) {
		b, err := client.NewBudget(eng, client.BudgetConfig{})
		must(t, err)
		defer b.Close(context.Background())
		slow := 201
		l := &lagging{lag: func(n int) time.Duration {
			if n == slow {
				return time.Minute
			}
			return 20 * time.Millisecond
		}}
		backoff := client.DefaultBackoff
		backoff.Attempts = 5
		tr := &moonhttp.Transport{Base: l, Engine: eng, Backoff: backoff, Budget: b, Hedge: &client.Hedge{}}
		start := time.Now()
		for range 200 {
			get(t, context.Background(), tr)
		}
		d, ok := b.HedgeDelay(0.95)
		if !ok || d < 20*time.Millisecond*15/16 || d > 20*time.Millisecond*17/16 {
			t.Fatalf("after 200 requests of 20ms the budget's p95 is %v, %v", d, ok)
		}
		if got := took(func() { get(t, context.Background(), tr) }); got != d+20*time.Millisecond {
			t.Fatalf("a request whose first attempt takes a minute took %v, want its hedge's answer at %v", got, d+20*time.Millisecond)
		}

		l.mu.Lock()
		l.down, l.sent = true, 0
		l.mu.Unlock()
		for range 100 {
			if code := get(t, context.Background(), tr).StatusCode; code != http.StatusServiceUnavailable {
				t.Fatalf("in the outage: %d, want 503", code)
			}
		}
		st := b.Stats()
		if st.Firsts != 301 || st.Hedges != 1 || st.RefusedRetries == 0 {
			t.Fatalf("budget %+v, want 301 first attempts, one hedge and refused retries", st)
		}
		// One window: retries and hedges ≤ max(Ratio × firsts, MinPerSecond × Window).
		if d := time.Since(start); d >= 10*time.Second {
			t.Fatalf("took %v, past one window", d)
		}
		if spent := float64(st.Retries + st.Hedges); spent > max(0.1*301, 10) {
			t.Fatalf("%v retries and hedges for 301 first attempts, want at most a tenth", spent)
		}
		if l.sent > 100+int(st.Retries) {
			t.Fatalf("%d attempts in the outage for 100 requests and %d retries", l.sent, st.Retries)
		}
	})
}
