package client

import "time"

// Hedge says when a client sends a copy of a request whose answer is
// late, to race the attempt already out. The first answer wins and the
// others are cancelled. moonhttp.Transport and moongrpc's client
// interceptor take one, and each says which requests it hedges and what
// counts as an answer.
//
// A hedge cuts the tail of latency at the price of extra requests. With
// a Budget, each hedge asks it first, and a hedge it refuses is not
// sent. Without one, nothing bounds the extra load when the backend
// slows down. Hedges do not count against Backoff.Attempts.
//
// The zero Hedge waits for the 95th percentile of the latencies its
// Budget has seen, and sends at most one hedge per request.
type Hedge struct {
	// Delay is how long an attempt goes unanswered before a hedge is
	// sent. Zero or less reads it from the Budget instead (see
	// Quantile). With neither, no hedge is sent. Timers ring late, by up
	// to a millisecond on an idle Go runtime, so each client learns how
	// late its hedge timers ring and sets them early by as much: hedges
	// go out Delay after their attempts on average, never before half
	// of it.
	Delay time.Duration
	// Quantile picks the delay from the latencies of the first attempts
	// the Budget has seen: at 0.95, about one request in twenty is
	// hedged. Outside (0, 1), zero included, it is 0.95. Until the
	// budget has seen enough first attempts to tell, no hedge is sent.
	// After a spell too quiet to tell, hedges wait for the delay the
	// budget last knew (see Budget.HedgeDelay).
	// These timers are not set early, as a Delay's are: the quantile is
	// the share of requests hedged, and early alarms would hedge more.
	// A late timer sends its hedge past the quantile, so a few fewer go.
	Quantile float64
	// Max is the most hedges one request sends, over all its attempts.
	// Zero or less is 1. While no answer comes, one more goes out each
	// delay.
	Max int
}

// defaultHedgeQuantile is the latency quantile a hedge waits for by
// default. It hedges about one request in twenty, the share "The Tail
// at Scale" hedges at. A budget's default ratio of a tenth leaves room
// for it.
const defaultHedgeQuantile = 0.95

// DelayFrom is how long an attempt waits before a hedge, given the
// budget b. It is h.Delay if set, or else b's delay at h.Quantile. It
// is false when no hedge is due: h is nil, neither gives a delay, or b
// has not seen enough first attempts yet (see Budget.HedgeDelay).
func (h *Hedge) DelayFrom(b *Budget) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if h.Delay > 0 {
		return h.Delay, true
	}
	q := h.Quantile
	if !(q > 0 && q < 1) {
		q = defaultHedgeQuantile
	}
	d, ok := b.HedgeDelay(q)
	return d, ok && d > 0
}
