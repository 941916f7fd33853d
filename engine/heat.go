package engine

import (
	"math"
	"runtime/metrics"
	"time"
)

// HeatTarget is the scheduling delay at which the process counts as fully
// hot: heat 1. It is CoDel's target sojourn time (5 ms), the delay past which
// a queue is standing rather than absorbing a burst; here the queue is the Go
// scheduler's run queue.
const HeatTarget = 5 * time.Millisecond

// heatMeter measures the process's heat from the Go runtime: the 99th
// percentile of how long goroutines waited runnable before they ran, over the
// span since the previous reading, divided by HeatTarget. It is owned by the
// directory actor, so it needs no lock.
type heatMeter struct {
	sample []metrics.Sample
	last   []uint64
}

const schedLatencies = "/sched/latencies:seconds"

func newHeatMeter() *heatMeter {
	m := &heatMeter{sample: []metrics.Sample{{Name: schedLatencies}}}
	m.read() // the first reading only sets the baseline
	return m
}

// read returns the heat since the previous read: 0 when nothing was
// scheduled, otherwise p99 latency / HeatTarget, never negative, NaN or Inf.
func (m *heatMeter) read() float64 {
	metrics.Read(m.sample)
	if m.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := m.sample[0].Value.Float64Histogram()
	if len(m.last) != len(h.Counts) {
		m.last = make([]uint64, len(h.Counts))
		copy(m.last, h.Counts)
		return 0
	}
	return heatOf(h.Counts, m.last, h.Buckets, true)
}

// heatOf is the p99 of the difference between two cumulative histograms,
// in units of HeatTarget; with advance it moves last up to counts.
func heatOf(counts, last []uint64, buckets []float64, advance bool) float64 {
	var total uint64
	for i, c := range counts {
		if c > last[i] {
			total += c - last[i]
		}
	}
	if total == 0 {
		return 0
	}
	want := total - total/100 // the p99 rank
	var seen uint64
	p99 := 0.0
	for i, c := range counts {
		if c > last[i] {
			seen += c - last[i]
		}
		if seen >= want {
			// The bucket's lower bound: a conservative reading.
			p99 = buckets[i]
			break
		}
	}
	if advance {
		copy(last, counts)
	}
	if math.IsNaN(p99) || math.IsInf(p99, 0) || p99 < 0 {
		if math.IsInf(p99, 1) {
			return math.MaxFloat64
		}
		return 0
	}
	return p99 / HeatTarget.Seconds()
}
