package moonredis

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestSpans: calls begun within a sixteenth of Timeout share a ctx, and
// each call's ctx ends between Timeout and a sixteenth more after the
// call began, or at once when life ends (Close).
func TestSpans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		life, end := context.WithCancel(context.Background())
		s := spans{life: life, timeout: 160 * time.Millisecond}
		start := time.Now()
		steps := []struct {
			at       time.Duration // since start
			same     bool          // the ctx is the previous call's
			deadline time.Duration // the ctx's, since start
		}{
			{0, false, 170 * time.Millisecond},
			{5 * time.Millisecond, true, 170 * time.Millisecond},
			{10 * time.Millisecond, false, 180 * time.Millisecond},
			{19 * time.Millisecond, true, 180 * time.Millisecond},
			{300 * time.Millisecond, false, 470 * time.Millisecond},
		}
		var prev context.Context
		var all []context.Context
		for _, st := range steps {
			time.Sleep(time.Until(start.Add(st.at)))
			ctx := s.ctx()
			if got := ctx == prev; got != st.same {
				t.Errorf("at %v: shared %v, want %v", st.at, got, st.same)
			}
			d, ok := ctx.Deadline()
			if !ok || d.Sub(start) != st.deadline {
				t.Errorf("at %v: deadline %v after start (%v), want %v", st.at, d.Sub(start), ok, st.deadline)
			}
			if left := time.Until(d); left < s.timeout || left > s.timeout+s.timeout/16 {
				t.Errorf("at %v: the call has %v, want Timeout to a sixteenth more", st.at, left)
			}
			if ctx.Err() != nil {
				t.Errorf("at %v: the ctx handed out has ended: %v", st.at, ctx.Err())
			}
			prev = ctx
			all = append(all, ctx)
		}
		if all[0].Err() != context.DeadlineExceeded {
			t.Errorf("the first span after its deadline: %v, want DeadlineExceeded", all[0].Err())
		}
		end()
		if err := prev.Err(); err != context.Canceled {
			t.Errorf("the last span after Close: %v, want Canceled", err)
		}
	})
}
