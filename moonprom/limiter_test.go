package moonprom_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/moonprom"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A bucket of 2 a second, burst 3, after 4 Allows, a Wait of half a second
// and a retune, in Prometheus's text form: the quota follows the retune.
func TestLimiterCollector(t *testing.T) {
	clock := vclock.NewVirtual()
	eng := client.NewEngine(client.WithClock(clock))
	t.Cleanup(func() { eng.Shutdown(context.Background()) })
	b, err := client.NewBucket(eng, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		b.Allow()
	}
	done := make(chan error, 1)
	go func() { done <- b.Wait(t.Context()) }()
	// The Wait's wake-up on the clock says it is in line.
	if err := clock.WaitPending(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(500 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := b.SetBurst(10); err != nil {
		t.Fatal(err)
	}
	c := moonprom.NewLimiterCollector(b, "api")
	want := `
# HELP moonpool_limiter_allowed_total Requests the limiter allowed.
# TYPE moonpool_limiter_allowed_total counter
moonpool_limiter_allowed_total{limiter="api"} 4
# HELP moonpool_limiter_quota Requests the limiter allows per quota window now.
# TYPE moonpool_limiter_quota gauge
moonpool_limiter_quota{limiter="api"} 10
# HELP moonpool_limiter_quota_window_seconds The quota's window now: for a bucket, the time it takes to fill from empty.
# TYPE moonpool_limiter_quota_window_seconds gauge
moonpool_limiter_quota_window_seconds{limiter="api"} 5
# HELP moonpool_limiter_refused_total Requests the limiter refused, and Waits that ended without their tokens.
# TYPE moonpool_limiter_refused_total counter
moonpool_limiter_refused_total{limiter="api"} 1
# HELP moonpool_limiter_wait_seconds_total Time granted Waits spent waiting in line.
# TYPE moonpool_limiter_wait_seconds_total counter
moonpool_limiter_wait_seconds_total{limiter="api"} 0.5
# HELP moonpool_limiter_waited_total Waits granted after waiting in line.
# TYPE moonpool_limiter_waited_total counter
moonpool_limiter_waited_total{limiter="api"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// A nil limiter describes its metrics and collects none.
func TestLimiterCollectorNil(t *testing.T) {
	var b *client.Bucket
	c := moonprom.NewLimiterCollector(b, "none")
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("a nil limiter collected %d metrics", n)
	}
}
