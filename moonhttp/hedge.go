package moonhttp

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/moonpool-go/moonpool/client"
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
// false if it sends none: the request may not be hedged, its hedges are
// spent, or nothing says how long.
func (rt *roundTrip) hedgeDelay() (time.Duration, bool) {
	if rt.hedge == nil || rt.hedges >= most(rt.hedge) {
		return 0, false
	}
	return rt.hedge.DelayFrom(rt.t.Budget)
}

// race sends the attempt on a ctx of its own, and a hedge each delay
// while no answer has come, as long as the request has hedges left and
// the budget allows. The first answer wins, and race returns it as
// attempt would. If every attempt out fails, race returns the last
// failure.
func (rt *roundTrip) race(ctx context.Context, delay time.Duration) error {
	first := !rt.sent // the request's first attempt, whose latency counts
	// The attempt gets a ctx of its own, so that a hedge that wins can
	// cancel it.
	actx, cancel := context.WithCancel(ctx)
	r, err := rt.next(actx)
	if err != nil {
		cancel()
		return err
	}
	clock := rt.t.Engine.Clock()
	rc := &race{t: rt.t, base: rt.base, out: make(chan entrant, 1+most(rt.hedge)-rt.hedges)}
	start := clock.Now()
	rc.run(r, cancel, false)
	due := make(chan struct{}, 1)
	ring := func() {
		select {
		case due <- struct{}{}:
		default:
		}
	}
	timer := clock.AfterFunc(delay, ring)
	defer func() { timer.Stop() }()
	out := 1         // entrants still running
	firstOut := true // entrant 0 is among them
	var last entrant // the latest failure
	for {
		select {
		case <-due:
			hctx, hcancel := context.WithCancel(ctx)
			h, err := rt.again(hctx)
			if err != nil {
				hcancel()
				continue // the body cannot be had again: no hedge
			}
			if !rt.t.Budget.Hedge() {
				closeBody(h)
				hcancel()
				continue // refused: this request sends no more hedges
			}
			rt.hedges++
			rc.run(h, hcancel, true)
			out++
			if rt.hedges < most(rt.hedge) {
				timer = clock.AfterFunc(delay, ring)
			}
		case e := <-rc.out:
			out--
			if e.i == 0 {
				firstOut = false
			}
			switch {
			case e.unsent:
			case e.err == nil:
				rc.end(e.i)
				discard(last.resp)
				if first && e.i == 0 {
					rt.t.Budget.Observe(e.took)
				} else if first && firstOut {
					// The first attempt lost: its latency is at least
					// this long. Leaving it out would make the quantile
					// ever shorter and the hedges ever more.
					rt.t.Budget.Observe(time.Duration(clock.Now() - start))
				}
				rt.resp = rc.winner(e)
				return nil
			default:
				discard(last.resp)
				last = e
			}
			if out == 0 {
				rc.end(-1)
				rt.resp = last.resp
				return last.err
			}
		case <-ctx.Done():
			rc.end(-1)
			discard(last.resp)
			return client.Permanent(ctx.Err())
		}
	}
}

// race is the state of one attempt's race between the request and its
// hedges.
type race struct {
	t    *Transport
	base http.RoundTripper
	out  chan entrant // room for every entrant, so none ever blocks

	mu      sync.Mutex
	over    bool                 // a winner is chosen or the race given up
	cancels []context.CancelFunc // each entrant's, by index
}

// entrant is what one attempt of a race came back with.
type entrant struct {
	i      int            // its index: 0 for the attempt, then each hedge
	resp   *http.Response // as attempt keeps it; nil if none
	err    error          // as attempt returns it
	took   time.Duration  // from sending to the answer
	unsent bool           // the hedge was never sent: its Bucket wait failed
	cancel context.CancelFunc
}

// run sends r on a goroutine of its own, after waiting for the Bucket if
// wait says so, and hands what comes back to the race.
func (rc *race) run(r *http.Request, cancel context.CancelFunc, wait bool) {
	rc.mu.Lock()
	i := len(rc.cancels)
	rc.cancels = append(rc.cancels, cancel)
	rc.mu.Unlock()
	go func() {
		ctx := r.Context()
		if wait && rc.t.Bucket != nil {
			if err := rc.t.Bucket.Wait(ctx); err != nil {
				closeBody(r)
				rc.hand(entrant{i: i, unsent: true, cancel: cancel})
				return
			}
		}
		clock := rc.t.Engine.Clock()
		start := clock.Now()
		resp, err := rc.base.RoundTrip(r)
		resp, err = rc.t.judge(ctx, false, resp, err)
		rc.hand(entrant{i: i, resp: resp, err: err, took: time.Duration(clock.Now() - start), cancel: cancel})
	}()
}

// hand gives e to the race, or drains and closes its response if the
// race is over.
func (rc *race) hand(e entrant) {
	rc.mu.Lock()
	if !rc.over {
		rc.out <- e
		rc.mu.Unlock()
		return
	}
	rc.mu.Unlock()
	e.cancel()
	discard(e.resp)
}

// end closes the race: every entrant but the winner (-1 for none) is
// cancelled, and what the others already brought is drained and closed.
// Entrants that come back later drain their own.
func (rc *race) end(winner int) {
	rc.mu.Lock()
	rc.over = true
	rc.mu.Unlock()
	for i, cancel := range rc.cancels {
		if i != winner {
			cancel()
		}
	}
	for {
		select {
		case e := <-rc.out:
			discard(e.resp)
		default:
			return
		}
	}
}

// winner is the winning entrant's response. Its attempt's ctx must live
// until the body has been read, so closing the body cancels it.
func (rc *race) winner(e entrant) *http.Response {
	if e.resp.Body == nil || e.resp.Body == http.NoBody {
		e.cancel()
		return e.resp
	}
	e.resp.Body = &cancelBody{ReadCloser: e.resp.Body, cancel: e.cancel}
	return e.resp
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
