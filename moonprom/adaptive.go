package moonprom

import (
	"reflect"
	"sync"

	"github.com/moonpool-go/moonpool/client"
	"github.com/prometheus/client_golang/prometheus"
)

// AdaptiveGate is what an adaptive gate collector reads:
// *client.AdaptiveGate.
type AdaptiveGate interface {
	Stats() client.AdaptiveStats
}

// adaptiveReasons names the refusals of client.AdaptiveClass, in the
// order refusals reads them.
var adaptiveReasons = [...]string{"shed", "queue_full", "deadline", "cancelled"}

// refusals are c's refusals, in the order of adaptiveReasons.
func refusals(c client.AdaptiveClass) [len(adaptiveReasons)]int64 {
	return [...]int64{c.Shed, c.QueueFull, c.Deadline, c.Cancelled}
}

// adaptiveCollector reports one adaptive gate; its descriptions are made
// once.
type adaptiveCollector struct {
	g                       AdaptiveGate
	limit, inFlight, queued *prometheus.Desc
	latency, baseline       *prometheus.Desc
	entered, refused        *prometheus.Desc
	mu                      sync.Mutex
	last                    [len(client.AdaptiveStats{}.Classes)]client.AdaptiveClass // counts at the last collection
	classes                 [len(client.AdaptiveStats{}.Classes)]string
}

// NewAdaptiveCollector returns a collector for g under the const label
// gate=name. A collection takes one Stats snapshot, which asks the gate's
// actor and waits for its answer: a turn of the actor, not a wait in line.
//
// A nil g (or a nil pointer) gives a collector that describes the metrics
// and collects none. After g is closed the counters stand at the last
// counts collected, and the gauges read zero.
//
// The metrics (see client.AdaptiveStats for each figure):
//   - gauges moonpool_adaptive_limit, _in_flight and _queued: how many
//     calls may be inside at once now, how many are, and how many wait in
//     line;
//   - gauges moonpool_adaptive_latency_seconds and
//     _baseline_latency_seconds: the last window's mean latency, and the
//     latency the limit takes as no queue;
//   - counter moonpool_adaptive_entered_total by priority ("low",
//     "normal", "high", "critical"): calls let in;
//   - counter moonpool_adaptive_refused_total by priority and reason:
//     "shed" (no room, or cut from the line as the limit fell),
//     "queue_full" (the line was full, or a more important call took the
//     place), "deadline" (the expected wait would pass the call's
//     deadline) and "cancelled" (the caller's ctx ended in line).
func NewAdaptiveCollector(g AdaptiveGate, name string) prometheus.Collector {
	if r := reflect.ValueOf(g); !r.IsValid() || r.Kind() == reflect.Pointer && r.IsNil() {
		g = nil
	}
	labels := prometheus.Labels{"gate": name}
	desc := func(metric, help string, vars ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("moonpool", "adaptive", metric), help, vars, labels)
	}
	c := &adaptiveCollector{
		g:        g,
		limit:    desc("limit", "Calls the gate lets inside at once now."),
		inFlight: desc("in_flight", "Calls inside the gate now."),
		queued:   desc("queued", "Calls waiting in the gate's line now."),
		latency:  desc("latency_seconds", "The mean latency of the calls that left in the last window."),
		baseline: desc("baseline_latency_seconds", "The latency the gate takes as no queue at the dependency."),
		entered:  desc("entered_total", "Calls the gate let in.", "priority"),
		refused:  desc("refused_total", "Calls the gate refused, and calls whose ctx ended in its line.", "priority", "reason"),
	}
	for i := range c.classes {
		c.classes[i] = (client.PriorityLow + client.Priority(i)).String()
	}
	return c
}

// Describe sends the description of every metric the collector reports.
func (c *adaptiveCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.limit, c.inFlight, c.queued, c.latency, c.baseline, c.entered, c.refused} {
		ch <- d
	}
}

// Collect sends one Stats snapshot of the gate as metrics.
func (c *adaptiveCollector) Collect(ch chan<- prometheus.Metric) {
	if c.g == nil {
		return
	}
	s := c.g.Stats()
	c.mu.Lock()
	if s.Limit > 0 { // a live gate's limit is at least 1; a closed one says 0
		c.last = s.Classes
	}
	classes := c.last
	c.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	gauge(c.limit, float64(s.Limit))
	gauge(c.inFlight, float64(s.InFlight))
	gauge(c.queued, float64(s.Queued))
	gauge(c.latency, s.Latency.Seconds())
	gauge(c.baseline, s.Baseline.Seconds())
	for i, k := range classes {
		ch <- prometheus.MustNewConstMetric(c.entered, prometheus.CounterValue, float64(k.Entered), c.classes[i])
		for j, n := range refusals(k) {
			ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(n), c.classes[i], adaptiveReasons[j])
		}
	}
}
