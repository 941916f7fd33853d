package moonprom

import (
	"reflect"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/prometheus/client_golang/prometheus"
)

// Limiter is what a limiter collector reads: *client.Bucket, Window,
// KeyedBucket and KeyedWindow.
type Limiter interface {
	Stats() client.LimiterStats
}

// quoter is a limiter that says its quota now, as every client limiter
// does; a Limiter without it is reported without the quota gauges.
type quoter interface {
	Quota() (q int, w time.Duration)
}

// limiterCollector reports one limiter; its descriptions are made once.
type limiterCollector struct {
	l                        Limiter
	q                        quoter // nil when l does not say its quota
	allowed, refused, waited *prometheus.Desc
	waitTime, quota, window  *prometheus.Desc
}

// NewLimiterCollector returns a collector for l under the const label
// limiter=name. It reads one Stats snapshot a collection, which asks
// nothing of the limiter's actor and so never blocks.
//
// A nil l (or a nil pointer) gives a collector that describes the metrics
// and collects none. After l is closed its counts stand as they were.
//
// The metrics (see client.LimiterStats for each figure):
//   - counters moonpool_limiter_allowed_total, _refused_total,
//     _waited_total and _wait_seconds_total (Waits granted after waiting
//     in line, and their time there, on the engine's clock);
//   - gauges moonpool_limiter_quota and moonpool_limiter_quota_window_seconds,
//     the limiter's quota now (q requests per w; see client.Bucket.Quota),
//     which follow a retune; left out for a Limiter without a Quota method.
func NewLimiterCollector(l Limiter, name string) prometheus.Collector {
	if r := reflect.ValueOf(l); !r.IsValid() || r.Kind() == reflect.Pointer && r.IsNil() {
		l = nil
	}
	labels := prometheus.Labels{"limiter": name}
	desc := func(metric, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("moonpool", "limiter", metric), help, nil, labels)
	}
	c := &limiterCollector{
		l:        l,
		allowed:  desc("allowed_total", "Requests the limiter allowed."),
		refused:  desc("refused_total", "Requests the limiter refused, and Waits that ended without their tokens."),
		waited:   desc("waited_total", "Waits granted after waiting in line."),
		waitTime: desc("wait_seconds_total", "Time granted Waits spent waiting in line."),
		quota:    desc("quota", "Requests the limiter allows per quota window now."),
		window:   desc("quota_window_seconds", "The quota's window now: for a bucket, the time it takes to fill from empty."),
	}
	c.q, _ = l.(quoter)
	return c
}

// Describe sends the description of every metric the collector reports.
func (c *limiterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.allowed
	ch <- c.refused
	ch <- c.waited
	ch <- c.waitTime
	if c.q != nil {
		ch <- c.quota
		ch <- c.window
	}
}

// Collect sends one Stats snapshot of the limiter as metrics.
func (c *limiterCollector) Collect(ch chan<- prometheus.Metric) {
	if c.l == nil {
		return
	}
	s := c.l.Stats()
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	counter(c.allowed, float64(s.Allowed))
	counter(c.refused, float64(s.Refused))
	counter(c.waited, float64(s.Waited))
	counter(c.waitTime, s.WaitTime.Seconds())
	if c.q != nil {
		q, w := c.q.Quota()
		ch <- prometheus.MustNewConstMetric(c.quota, prometheus.GaugeValue, float64(q))
		ch <- prometheus.MustNewConstMetric(c.window, prometheus.GaugeValue, w.Seconds())
	}
}
