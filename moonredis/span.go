package moonredis

import (
	"context"
	"sync/atomic"
	"time"
)

// spans hands the calls callers make themselves (see limiter.direct) a
// ctx that Close ends, and that ends by itself between Timeout and a
// sixteenth of it more after the call began. The calls begun within a
// sixteenth of Timeout of each other share one. A ctx of each call's own
// would start and stop a timer per call: a few microseconds of a round
// trip of a hundred. A call answered later than Timeout is late on the
// engine's clock all the same (see limiter.direct); the ctx only stops
// the client waiting.
type spans struct {
	life    context.Context // Close ends it, and every span with it
	timeout time.Duration
	cur     atomic.Pointer[span]
}

// span is one shared ctx, handed out until until. Its deadline is
// Timeout past until.
type span struct {
	ctx    context.Context
	cancel context.CancelFunc // called by nobody: the deadline or the end of life ends the span
	until  time.Time
}

// ctx is a ctx for a call beginning now.
func (s *spans) ctx() context.Context {
	now := time.Now()
	if c := s.cur.Load(); c != nil && now.Before(c.until) {
		return c.ctx
	}
	n := &span{until: now.Add(s.timeout / 16)}
	n.ctx, n.cancel = context.WithDeadline(s.life, n.until.Add(s.timeout))
	s.cur.Store(n)
	return n.ctx
}

// nop is the cancel of a call whose ctx is a span's: the span is not the
// call's to end.
func nop() {}
