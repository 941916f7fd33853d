package moonprom

import (
	"reflect"

	"github.com/moonpool-go/moonpool/client"
	"github.com/prometheus/client_golang/prometheus"
)

// Pool is what a collector reads: any *client.Pool, whatever it holds.
type Pool interface {
	Stats() client.Stats
}

// poolCollector reports one pool; its descriptions are made once.
type poolCollector struct {
	pool Pool

	maxLive, maxIdle, minIdle     *prometheus.Desc
	live, idle, busy, waiting     *prometheus.Desc
	gets, emptyGets, getTime      *prometheus.Desc
	made, makeFailures            *prometheus.Desc
	closed, closeFailures, panics *prometheus.Desc
	duplicates, resets, leaked    *prometheus.Desc
	shed, held, heldPastDeadline  *prometheus.Desc
	cancelled, waited, waitTime   *prometheus.Desc
	refusal, holding              *prometheus.Desc
}

// NewPoolCollector returns a collector for pool under the const label
// pool=name.
//
// moonpool_pool_max_live, _max_idle and _min_idle are Stats.Max, MaxIdle
// and MinIdle, read at each scrape, so they follow SetLimits. max_live and
// max_idle are left out while the pool has no such limit.
//
// A nil pool (or a nil *client.Pool) gives a collector that describes the
// metrics and collects none. After the pool is closed the collector
// reports it as Close left it: unregister it then.
//
// The metrics, all read from one Stats (see client.Stats for each figure):
//   - gauges moonpool_pool_live, _idle, _busy (lent or being opened) and
//     _waiting (Gets in line); moonpool_pool_max_live, _max_idle and
//     _min_idle, as above;
//   - counters moonpool_pool_gets_total, _empty_gets_total (Gets that found
//     nothing idle) and _get_seconds_total (their time waiting, opening and
//     checking);
//   - counters moonpool_pool_made_total, _make_failures_total,
//     _closed_total{reason=stale|evicted|surplus|broken|unreused|check_failed|outdated|shutdown},
//     whose reasons add up to Stats.Closes, _close_failures_total,
//     _panics_total, _duplicates_total, _resets_total and _leaked_total
//     (loans reported past PoolConfig.LeakAfter);
//   - counters moonpool_pool_shed_total{reason=closed|shedder|breaker|too_many_waiting}
//     (Gets refused), _held_total{reason=backoff|probe|bucket|fleet|ramp} (opens the
//     ward held back), _held_past_deadline_total, _cancelled_total (Gets
//     whose ctx ended in line), _waited_total and _wait_seconds_total (Gets
//     answered after waiting in line, and their time there);
//   - gauges moonpool_pool_breaker_refusal_ratio and
//     moonpool_pool_backoff_hold_seconds (the ward now).
func NewPoolCollector(pool Pool, name string) prometheus.Collector {
	if r := reflect.ValueOf(pool); !r.IsValid() || r.Kind() == reflect.Pointer && r.IsNil() {
		pool = nil
	}
	labels := prometheus.Labels{"pool": name}
	desc := func(metric, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("moonpool", "pool", metric), help, variable, labels)
	}
	return &poolCollector{
		pool:             pool,
		maxLive:          desc("max_live", "Most resources the pool may hold at once."),
		maxIdle:          desc("max_idle", "Most resources the pool keeps idle."),
		minIdle:          desc("min_idle", "Fewest resources the pool keeps idle, opening more in the background."),
		live:             desc("live", "Resources that exist: idle, lent and being opened."),
		idle:             desc("idle", "Resources idle in the pool, ready to lend."),
		busy:             desc("busy", "Resources lent out or being opened."),
		waiting:          desc("waiting", "Gets waiting in line for a resource."),
		gets:             desc("gets_total", "Gets and TryGets that asked the pool for a resource."),
		emptyGets:        desc("empty_gets_total", "Gets that found nothing idle and waited in line or opened a resource."),
		getTime:          desc("get_seconds_total", "Time Gets spent waiting in line, opening and checking."),
		made:             desc("made_total", "Resources opened and taken on by the pool."),
		makeFailures:     desc("make_failures_total", "Opens that failed."),
		closed:           desc("closed_total", "Resources the pool let go, by reason.", "reason"),
		closeFailures:    desc("close_failures_total", "Closes that failed or panicked."),
		panics:           desc("panics_total", "Opens and Closes that panicked."),
		duplicates:       desc("duplicates_total", "Resources an Open made that the pool already held."),
		resets:           desc("resets_total", "Calls of Reset on the open pool."),
		leaked:           desc("leaked_total", "Resources reported lent for longer than LeakAfter."),
		shed:             desc("shed_total", "Gets refused, by reason.", "reason"),
		held:             desc("held_total", "Opens the ward or its fleet held back, by reason.", "reason"),
		heldPastDeadline: desc("held_past_deadline_total", "Gets refused at once because the ward's hold would outlast their deadline."),
		cancelled:        desc("cancelled_total", "Gets whose ctx ended while they waited in line."),
		waited:           desc("waited_total", "Gets answered after waiting in line."),
		waitTime:         desc("wait_seconds_total", "Time Gets spent waiting in line."),
		refusal:          desc("breaker_refusal_ratio", "Share of opens the ward's breaker refuses now."),
		holding:          desc("backoff_hold_seconds", "How much longer the ward's backoff holds opens back."),
	}
}

// Describe sends the description of every metric the collector reports.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.maxLive, c.maxIdle, c.minIdle, c.live, c.idle, c.busy, c.waiting,
		c.gets, c.emptyGets, c.getTime, c.made, c.makeFailures, c.closed,
		c.closeFailures, c.panics, c.duplicates, c.resets, c.leaked, c.shed,
		c.held, c.heldPastDeadline, c.cancelled, c.waited, c.waitTime,
		c.refusal, c.holding,
	} {
		ch <- d
	}
}

// Collect takes one Stats snapshot of the pool and sends it as metrics.
// It blocks for the snapshot, a round trip to the pool's actor.
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	if c.pool == nil {
		return
	}
	s := c.pool.Stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	if s.Max > 0 {
		gauge(c.maxLive, float64(s.Max))
	}
	if s.MaxIdle > 0 {
		gauge(c.maxIdle, float64(s.MaxIdle))
	}
	gauge(c.minIdle, float64(s.MinIdle))
	gauge(c.live, float64(s.Live))
	gauge(c.idle, float64(s.Idle))
	gauge(c.busy, float64(s.Busy))
	gauge(c.waiting, float64(s.Waiting))
	counter(c.gets, s.Gets)
	counter(c.emptyGets, s.EmptyGets)
	ch <- prometheus.MustNewConstMetric(c.getTime, prometheus.CounterValue, s.GetTime.Seconds())
	counter(c.made, s.Made)
	counter(c.makeFailures, s.MakeFailures)
	counter(c.closed, s.Stale, "stale")
	counter(c.closed, s.Evicted, "evicted")
	counter(c.closed, s.Surplus, "surplus")
	counter(c.closed, s.Broken, "broken")
	counter(c.closed, s.Unreused, "unreused")
	counter(c.closed, s.CheckFailures, "check_failed")
	counter(c.closed, s.Outdated, "outdated")
	counter(c.closed, s.Shutdown, "shutdown")
	counter(c.closeFailures, s.CloseFailures)
	counter(c.panics, s.Panics)
	counter(c.duplicates, s.Duplicates)
	counter(c.resets, s.Resets)
	counter(c.leaked, s.Leaked)
	counter(c.shed, s.ShedClosed, "closed")
	counter(c.shed, s.ShedOverloaded, "shedder")
	counter(c.shed, s.ShedBreaker, "breaker")
	counter(c.shed, s.TooManyWaiting, "too_many_waiting")
	counter(c.held, s.HeldBackoff, "backoff")
	counter(c.held, s.HeldProbe, "probe")
	counter(c.held, s.HeldBucket, "bucket")
	counter(c.held, s.HeldFleet, "fleet")
	counter(c.held, s.HeldRamp, "ramp")
	counter(c.heldPastDeadline, s.HeldPastDeadline)
	counter(c.cancelled, s.Cancelled)
	counter(c.waited, s.Waited)
	ch <- prometheus.MustNewConstMetric(c.waitTime, prometheus.CounterValue, s.WaitTime.Seconds())
	gauge(c.refusal, s.Refusal)
	gauge(c.holding, s.Holding.Seconds())
}
