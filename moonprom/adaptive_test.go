package moonprom_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/moonprom"
	"github.com/prometheus/client_golang/prometheus/testutil"
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

// adaptiveText is the collector's text for a gate named api: the gauges,
// then entered and refused counts by priority, each listed as
// "priority=n" or "priority/reason=n"; the rest are 0.
func adaptiveText(limit, inFlight, queued int, entered, refused map[string]int) string {
	var b strings.Builder
	gauge := func(name, help string, v int) {
		fmt.Fprintf(&b, "# HELP moonpool_adaptive_%s %s\n# TYPE moonpool_adaptive_%s gauge\nmoonpool_adaptive_%s{gate=\"api\"} %d\n", name, help, name, name, v)
	}
	gauge("limit", "Calls the gate lets inside at once now.", limit)
	gauge("in_flight", "Calls inside the gate now.", inFlight)
	gauge("queued", "Calls waiting in the gate's line now.", queued)
	gauge("latency_seconds", "The mean latency of the calls that left in the last window.", 0)
	gauge("baseline_latency_seconds", "The latency the gate takes as no queue at the dependency.", 0)
	classes := []string{"low", "normal", "high", "critical"}
	b.WriteString("# HELP moonpool_adaptive_entered_total Calls the gate let in.\n# TYPE moonpool_adaptive_entered_total counter\n")
	for _, c := range classes {
		fmt.Fprintf(&b, "moonpool_adaptive_entered_total{gate=\"api\",priority=%q} %d\n", c, entered[c])
	}
	b.WriteString("# HELP moonpool_adaptive_refused_total Calls the gate refused, and calls whose ctx ended in its line.\n# TYPE moonpool_adaptive_refused_total counter\n")
	for _, c := range classes {
		for _, r := range []string{"shed", "queue_full", "deadline", "cancelled"} {
			fmt.Fprintf(&b, "moonpool_adaptive_refused_total{gate=\"api\",priority=%q,reason=%q} %d\n", c, r, refused[c+"/"+r])
		}
	}
	return b.String()
}

// A gate of one with a line of one: a high caller cancelled in line, a
// low one pushed out of the line by a critical one, and a low TryEnter
// with no room, reported by priority and reason with the limit, in-flight
// and line; then the critical caller let in; after Close the counts stand
// and the gauges read zero.
func TestAdaptiveCollector(t *testing.T) {
	clock := vclock.NewVirtual()
	eng := client.NewEngine(client.WithClock(clock))
	t.Cleanup(func() { eng.Shutdown(context.Background()) })
	g, err := client.NewAdaptiveGate(eng, client.AdaptiveConfig{Min: 1, Max: 1, Start: 1, Queue: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := moonprom.NewAdaptiveCollector(g, "api")
	bg := context.Background()
	first, err := g.Enter(bg)
	if err != nil {
		t.Fatal(err)
	}
	enter := func(ctx context.Context) chan error {
		ch := make(chan error, 1)
		go func() {
			p, err := g.Enter(ctx)
			p.Leave()
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
	high, cancel := context.WithCancel(client.WithPriority(bg, client.PriorityHigh))
	highDone := enter(high)
	inLine(t, g, 1)
	cancel()
	if err := wait(highDone, "high"); !errors.Is(err, context.Canceled) {
		t.Fatalf("high caller cancelled in line: %v", err)
	}
	lowDone := enter(client.WithPriority(bg, client.PriorityLow))
	inLine(t, g, 1)
	criticalDone := enter(client.WithPriority(bg, client.PriorityCritical))
	if err := wait(lowDone, "low"); !errors.Is(err, client.ErrTooManyWaiting) {
		t.Fatalf("low caller: %v, want ErrTooManyWaiting", err)
	}
	if _, ok := g.TryEnter(client.WithPriority(bg, client.PriorityLow)); ok {
		t.Fatal("TryEnter found room in a full gate")
	}
	refused := map[string]int{"high/cancelled": 1, "low/queue_full": 1, "low/shed": 1}
	want := adaptiveText(1, 1, 1, map[string]int{"normal": 1}, refused)
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}

	first.Leave()
	if err := wait(criticalDone, "critical"); err != nil {
		t.Fatal(err)
	}
	entered := map[string]int{"normal": 1, "critical": 1}
	if err := testutil.CollectAndCompare(c, strings.NewReader(adaptiveText(1, 0, 0, entered, refused))); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(bg); err != nil {
		t.Fatal(err)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(adaptiveText(0, 0, 0, entered, refused))); err != nil {
		t.Errorf("after Close: %v", err)
	}
}

// A nil gate describes its metrics and collects none.
func TestAdaptiveCollectorNil(t *testing.T) {
	var g *client.AdaptiveGate
	if n := testutil.CollectAndCount(moonprom.NewAdaptiveCollector(g, "none")); n != 0 {
		t.Errorf("a nil gate collected %d metrics", n)
	}
}
