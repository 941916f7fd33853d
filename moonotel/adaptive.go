package moonotel

import (
	"context"
	"errors"
	"sync"

	"github.com/moonpool-go/moonpool/client"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The attributes of the adaptive gate instruments.
const (
	adaptiveNameKey = attribute.Key("moonpool.adaptive.name")
	priorityKey     = attribute.Key("moonpool.priority")
	reasonKey       = attribute.Key("moonpool.adaptive.reason")
)

// AdaptiveGate is what the adaptive gate instruments read:
// *client.AdaptiveGate.
type AdaptiveGate interface {
	Stats() client.AdaptiveStats
}

// adaptiveClasses is how many priorities client.AdaptiveStats counts.
const adaptiveClasses = len(client.AdaptiveStats{}.Classes)

// ObserveAdaptive reports g under name (the value of
// moonpool.adaptive.name, which should be unique in the program) through a
// meter of provider, until the returned Registration is unregistered. It
// never blocks. A collection takes one Stats snapshot, which asks the
// gate's actor and waits for its answer: a turn of the actor, not a wait
// in line. After g is closed the counters stand at the last counts
// observed, and the limit, in-flight and line read zero.
//
// The instruments (see client.AdaptiveStats for each figure):
//   - moonpool.adaptive.limit, moonpool.adaptive.in_flight and
//     moonpool.adaptive.queued {request}: how many calls may be inside at
//     once now, how many are, and how many wait in line;
//   - moonpool.adaptive.latency and moonpool.adaptive.latency.baseline
//     (s): the last window's mean latency, and the latency the limit
//     takes as no queue;
//   - moonpool.adaptive.entered {request}: calls let in, by
//     moonpool.priority ("low", "normal", "high", "critical");
//   - moonpool.adaptive.refused {request}: calls refused, by
//     moonpool.priority and moonpool.adaptive.reason: "shed" (no room, or
//     cut from the line as the limit fell), "queue_full" (the line was
//     full, or a more important call took the place), "deadline" (the
//     expected wait would pass the call's deadline) and "cancelled" (the
//     caller's ctx ended in line).
//
// It returns an error for a nil provider or gate, or if the meter refuses
// an instrument or the callback; nothing is registered then.
func ObserveAdaptive(provider metric.MeterProvider, g AdaptiveGate, name string) (metric.Registration, error) {
	if isNil(provider) {
		return nil, errors.New("moonpool: moonotel.ObserveAdaptive: nil MeterProvider")
	}
	if isNil(g) {
		return nil, errors.New("moonpool: moonotel.ObserveAdaptive: nil gate")
	}
	meter := provider.Meter(ScopeName)
	var errs []error
	upDown := func(name, desc string) metric.Int64ObservableUpDownCounter {
		c, err := meter.Int64ObservableUpDownCounter(name, metric.WithUnit("{request}"), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	seconds := func(name, desc string) metric.Float64ObservableGauge {
		c, err := meter.Float64ObservableGauge(name, metric.WithUnit("s"), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	counter := func(name, desc string) metric.Int64ObservableCounter {
		c, err := meter.Int64ObservableCounter(name, metric.WithUnit("{request}"), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	limit := upDown("moonpool.adaptive.limit", "The number of calls the gate lets inside at once now.")
	inFlight := upDown("moonpool.adaptive.in_flight", "The number of calls inside the gate now.")
	queued := upDown("moonpool.adaptive.queued", "The number of calls waiting in the gate's line now.")
	latency := seconds("moonpool.adaptive.latency", "The mean latency of the calls that left in the last window.")
	baseline := seconds("moonpool.adaptive.latency.baseline", "The latency the gate takes as no queue at the dependency.")
	entered := counter("moonpool.adaptive.entered", "The number of calls the gate let in.")
	refused := counter("moonpool.adaptive.refused", "The number of calls the gate refused, and of calls whose ctx ended in its line.")
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	reasons := [...]string{"shed", "queue_full", "deadline", "cancelled"}
	gate := adaptiveNameKey.String(name)
	named := metric.WithAttributeSet(attribute.NewSet(gate))
	var byClass [adaptiveClasses]metric.ObserveOption
	var byReason [adaptiveClasses][len(reasons)]metric.ObserveOption
	for c := range byClass {
		p := priorityKey.String((client.PriorityLow + client.Priority(c)).String())
		byClass[c] = metric.WithAttributeSet(attribute.NewSet(gate, p))
		for r, reason := range reasons {
			byReason[c][r] = metric.WithAttributeSet(attribute.NewSet(gate, p, reasonKey.String(reason)))
		}
	}
	var mu sync.Mutex
	var last [adaptiveClasses]client.AdaptiveClass // the counts at the last observation
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := g.Stats()
		mu.Lock()
		if s.Limit > 0 { // a live gate's limit is at least 1; a closed one says 0
			last = s.Classes
		}
		classes := last
		mu.Unlock()
		o.ObserveInt64(limit, int64(s.Limit), named)
		o.ObserveInt64(inFlight, int64(s.InFlight), named)
		o.ObserveInt64(queued, int64(s.Queued), named)
		o.ObserveFloat64(latency, s.Latency.Seconds(), named)
		o.ObserveFloat64(baseline, s.Baseline.Seconds(), named)
		for c, k := range classes {
			o.ObserveInt64(entered, k.Entered, byClass[c])
			for r, n := range [...]int64{k.Shed, k.QueueFull, k.Deadline, k.Cancelled} {
				o.ObserveInt64(refused, n, byReason[c][r])
			}
		}
		return nil
	}, limit, inFlight, queued, latency, baseline, entered, refused)
}
