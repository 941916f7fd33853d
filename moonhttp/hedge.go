package moonhttp

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/internal/hedge"
)

// most is how many hedges h lets one request send: Max, at least 1.
func most(h *client.Hedge) int { return max(h.Max, 1) }

// Hedgeable reports whether Transport may race req with copies of itself
// (see Transport.Hedge). Its method must be GET, HEAD or OPTIONS, which
// RFC 9110 (section 9.2.1) calls safe. Its body, if any, must come again through
// GetBody. It must not ask for a protocol upgrade.
//
// Other requests may still be retried (see Retryable), but a hedge copies
// every slow request on purpose, so only requests that change nothing are
// hedged. A PUT sent twice at once can land after another client's write
// and undo it. A server that honours an Idempotency-Key answers a copy
// that arrives while the first still runs with 409 Conflict: the hedge
// could only win with a refusal.
func Hedgeable(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		return false
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	_, upgrade := req.Header["Upgrade"]
	return !upgrade
}

// hedgeDelay is how long the current attempt waits before a hedge, and
// the lead its alarms are set early by; false if it sends none: the
// request may not be hedged, its hedges are spent, or nothing says how
// long.
func (rt *roundTrip) hedgeDelay() (time.Duration, *hedge.Lead, bool) {
	if rt.hedge == nil || rt.hedges >= most(rt.hedge) {
		return 0, nil, false
	}
	return rt.t.lead.Delay(rt.hedge, rt.t.Budget)
}

// race sends the attempt on a ctx of its own, and a hedge each delay
// while no answer has come, as long as the request has hedges left and
// the budget allows. The first answer wins, and race returns it as
// attempt would. If every attempt out fails, race returns the last
// failure.
func (rt *roundTrip) race(ctx context.Context, delay time.Duration, lead *hedge.Lead) error {
	first := !rt.sent // the request's first attempt, whose latency counts
	// The attempt gets a ctx of its own, so that a hedge that wins can
	// cancel it.
	actx, cancel := context.WithCancel(ctx)
	r, err := rt.next(actx)
	if err != nil {
		cancel()
		return err
	}
	t, base := rt.t, rt.base
	cp := *rt // a copy, read only: rt stays on its caller's stack
	rc := &hedge.Race[*http.Response]{
		Clock:  t.Engine.Clock(),
		Budget: t.Budget,
		Delay:  delay,
		Left:   most(rt.hedge) - rt.hedges,
		First:  first,
		Lead:   lead,
		Ready: func(ctx context.Context) (hedge.Send[*http.Response], func(), bool) {
			h, err := cp.again(ctx)
			if err != nil {
				return nil, nil, false // the body cannot be had again
			}
			return send(ctx, t, base, h), func() { closeBody(h) }, true
		},
		Release: discard,
	}
	if t.Bucket != nil {
		rc.Wait = t.Bucket.Wait
	}
	e, err := rc.Run(ctx, cancel, send(actx, t, base, r))
	rt.hedges += rc.Sent
	switch {
	case err != nil:
		return client.Permanent(err)
	case !e.Answer:
		rt.resp = e.Val
		return e.Err
	}
	rt.resp = winner(e)
	return nil
}

// send is how one entrant of a race sends r through base on ctx. An
// answer is what t would not retry.
func send(ctx context.Context, t *Transport, base http.RoundTripper, r *http.Request) hedge.Send[*http.Response] {
	return func() hedge.Result[*http.Response] {
		resp, err := base.RoundTrip(r)
		resp, err = t.judge(ctx, false, resp, err)
		return hedge.Result[*http.Response]{Val: resp, Err: err, Answer: err == nil}
	}
}

// winner is the winning entrant's response. Its attempt's ctx must live
// until the body has been read, so closing the body cancels it.
func winner(e hedge.Entrant[*http.Response]) *http.Response {
	if e.Val.Body == nil || e.Val.Body == http.NoBody {
		e.Cancel()
		return e.Val
	}
	e.Val.Body = &cancelBody{ReadCloser: e.Val.Body, cancel: e.Cancel}
	return e.Val
}

// cancelBody is a response body that cancels its request's ctx when
// closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// discard drains a little of resp's body, so a connection that has its
// whole answer can be used again, and closes it. A nil resp is ignored.
func discard(resp *http.Response) {
	if resp == nil || resp.Body == nil {
		return
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxRetryBody))
	resp.Body.Close()
}
