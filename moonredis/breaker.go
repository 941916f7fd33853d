package moonredis

// breaker decides when a limiter stops calling Redis and when it looks
// again. It trips after a run of failed calls in a row, however many
// worked before: a Redis that went away fails every call, so the run is
// the quickest sure sign. A rate of failures over some seconds is not,
// since a busy key's successes from before the outage outweigh it.
//
// While it is tripped no request goes to Redis. One probe at a time
// does, at most one each spacing, and it takes nothing. The first call
// that works closes it.
//
// Times are nanoseconds on the engine's clock, given by the caller. The
// zero breaker trips after one failure and probes without a pause. It is
// not safe for concurrent use: the limiter's actor owns it.
type breaker struct {
	after   int   // failed calls in a row that trip it
	spacing int64 // the least time from one probe to the next
	failed  int   // failed calls in a row, while closed
	tripped bool
	probing bool  // a probe is out
	last    int64 // when the last probe went, or when it tripped
}

// newBreaker returns a closed breaker that trips after after failed calls
// in a row (at least 1) and probes at most once each spacing.
func newBreaker(after int, spacing int64) breaker {
	return breaker{after: max(after, 1), spacing: spacing}
}

// probe reports whether a probe should go now: the breaker is tripped,
// no probe is out, and spacing has passed since the last one went (or
// since it tripped). If so, it counts the probe out; probed takes it back.
// A clock that reads earlier than the last probe lets one go.
func (b *breaker) probe(now int64) bool {
	if !b.tripped || b.probing || (now-b.last < b.spacing && now >= b.last) {
		return false
	}
	b.probing, b.last = true, now
	return true
}

// probed notes that the probe out came back, and whether it worked. It
// reports whether that closed the breaker.
func (b *breaker) probed(ok bool) bool {
	b.probing = false
	if !ok {
		return false
	}
	return b.success()
}

// success notes a call that worked, and reports whether that closed the
// breaker: a call sent before it tripped may still come back.
func (b *breaker) success() bool {
	b.failed = 0
	if !b.tripped {
		return false
	}
	b.tripped = false
	return true
}

// failure notes a failed call at now, and reports whether that tripped
// the breaker. Failures while it is tripped change nothing.
func (b *breaker) failure(now int64) bool {
	if b.tripped {
		return false
	}
	b.failed++
	if b.failed < b.after {
		return false
	}
	b.failed, b.tripped, b.last = 0, true, now
	return true
}
