package moonotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/moonotel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// A bucket's counts and quota through its instruments: refusals, a wait of
// half a second, and a retune the quota follows.
func TestObserveLimiter(t *testing.T) {
	clock := vclock.NewVirtual()
	eng := client.NewEngine(client.WithClock(clock))
	t.Cleanup(func() { eng.Shutdown(context.Background()) })
	b, err := client.NewBucket(eng, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	reg, err := moonotel.ObserveLimiter(provider, b, "api")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()

	for range 5 {
		b.Allow()
	}
	done := make(chan error, 1)
	go func() { done <- b.Wait(t.Context()) }()
	if err := clock.WaitPending(t.Context(), 1); err != nil { // the Wait is in line
		t.Fatal(err)
	}
	clock.Advance(500 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := b.SetLimit(5); err != nil {
		t.Fatal(err)
	}
	const name = "{moonpool.limiter.name=api}"
	want := map[string]float64{
		"moonpool.limiter.allowed" + name:      4,
		"moonpool.limiter.refused" + name:      2,
		"moonpool.limiter.waits" + name:        1,
		"moonpool.limiter.wait_time" + name:    0.5,
		"moonpool.limiter.quota" + name:        3,
		"moonpool.limiter.quota.window" + name: 0.6,
	}
	got := collectAll(t, reader)
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (reported %v), want %v", k, g, ok, v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d points, want %d: %v", len(got), len(want), got)
	}
}

// A nil limiter or provider is an error, and nothing is registered.
func TestObserveLimiterNil(t *testing.T) {
	provider := sdkmetric.NewMeterProvider()
	defer provider.Shutdown(context.Background())
	var b *client.Bucket
	if _, err := moonotel.ObserveLimiter(provider, b, "x"); err == nil {
		t.Error("a nil *client.Bucket was accepted")
	}
	if _, err := moonotel.ObserveLimiter(nil, b, "x"); err == nil {
		t.Error("a nil provider was accepted")
	}
}

// collectAll is collect with gauges too.
func collectAll(t *testing.T, r sdkmetric.Reader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			add := func(attrs string, v float64) { got[m.Name+"{"+attrs+"}"] = v }
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					add(p.Attributes.Encoded(attribute.DefaultEncoder()), float64(p.Value))
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					add(p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					add(p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value)
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return got
}
