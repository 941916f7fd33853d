package moonotel_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/moonotel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// inLine waits, with a deadline, until g has n callers in line.
func inLine(t *testing.T, g *client.AdaptiveGate, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for g.Stats().Queued != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d in line after 10s, want %d", g.Stats().Queued, n)
		}
		runtime.Gosched()
	}
}

// adaptivePoints is what the instruments of a gate named api report: the
// gauges as given, and entered and refused by priority (and reason), as
// "priority" or "priority/reason" to n; the rest are 0.
func adaptivePoints(limit, inFlight, queued float64, entered, refused map[string]float64) map[string]float64 {
	const gate = "moonpool.adaptive.name=api"
	want := map[string]float64{
		"moonpool.adaptive.limit{" + gate + "}":            limit,
		"moonpool.adaptive.in_flight{" + gate + "}":        inFlight,
		"moonpool.adaptive.queued{" + gate + "}":           queued,
		"moonpool.adaptive.latency{" + gate + "}":          0,
		"moonpool.adaptive.latency.baseline{" + gate + "}": 0,
	}
	for _, p := range []string{"low", "normal", "high", "critical"} {
		want["moonpool.adaptive.entered{"+gate+",moonpool.priority="+p+"}"] = entered[p]
		for _, r := range []string{"shed", "queue_full", "deadline", "cancelled"} {
			want["moonpool.adaptive.refused{"+gate+",moonpool.adaptive.reason="+r+",moonpool.priority="+p+"}"] = refused[p+"/"+r]
		}
	}
	return want
}

// compare reports each point of got that differs from want.
func compare(t *testing.T, what string, got, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s: %s = %v (reported %v), want %v", what, k, g, ok, v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d points, want %d: %v", what, len(got), len(want), got)
	}
}

// A gate of one with a line of one: a low caller pushed out of the line
// by a critical one, and a high TryEnter with no room, reported by
// priority and reason with the limit, in-flight and line. After Close the
// counts stand and the gauges read zero.
func TestObserveAdaptive(t *testing.T) {
	clock := vclock.NewVirtual()
	eng := client.NewEngine(client.WithClock(clock))
	t.Cleanup(func() { eng.Shutdown(context.Background()) })
	g, err := client.NewAdaptiveGate(eng, client.AdaptiveConfig{Min: 1, Max: 1, Start: 1, Queue: 1})
	if err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	reg, err := moonotel.ObserveAdaptive(provider, g, "api")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()

	bg := context.Background()
	first, err := g.Enter(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Leave()
	enter := func(p client.Priority) chan error {
		ch := make(chan error, 1)
		go func() {
			pass, err := g.Enter(client.WithPriority(bg, p))
			pass.Leave()
			ch <- err
		}()
		return ch
	}
	wait := func(ch chan error, what string) error {
		t.Helper()
		select {
		case err := <-ch:
			return err
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer after 10s", what)
		}
		return nil
	}
	low := enter(client.PriorityLow)
	inLine(t, g, 1)
	critical := enter(client.PriorityCritical)
	if err := wait(low, "low"); !errors.Is(err, client.ErrTooManyWaiting) {
		t.Fatalf("low caller: %v, want ErrTooManyWaiting", err)
	}
	if _, ok := g.TryEnter(client.WithPriority(bg, client.PriorityHigh)); ok {
		t.Fatal("TryEnter found room in a full gate")
	}
	entered := map[string]float64{"normal": 1}
	refused := map[string]float64{"low/queue_full": 1, "high/shed": 1}
	compare(t, "full", collectAll(t, reader), adaptivePoints(1, 1, 1, entered, refused))

	if err := g.Close(bg); err != nil {
		t.Fatal(err)
	}
	if err := wait(critical, "critical"); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("critical caller in line at Close: %v, want ErrClosed", err)
	}
	compare(t, "closed", collectAll(t, reader), adaptivePoints(0, 0, 0, entered, refused))
}

// A nil gate or provider is an error, and nothing is registered.
func TestObserveAdaptiveNil(t *testing.T) {
	provider := sdkmetric.NewMeterProvider()
	defer provider.Shutdown(context.Background())
	var g *client.AdaptiveGate
	if _, err := moonotel.ObserveAdaptive(provider, g, "x"); err == nil {
		t.Error("a nil *client.AdaptiveGate was accepted")
	}
	if _, err := moonotel.ObserveAdaptive(nil, g, "x"); err == nil {
		t.Error("a nil provider was accepted")
	}
}
