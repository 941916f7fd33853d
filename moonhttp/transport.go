package moonhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/internal/hedge"
)

// Transport is an http.RoundTripper that sends a request again, under
// client.Retry, when the attempt failed in a way another attempt may not:
// the connection failed, or the server answered 429 Too Many Requests, 502
// Bad Gateway, 503 Service Unavailable or 504 Gateway Timeout.
//
// Only requests that are safe to send twice are retried (see Retryable):
// any other request is sent once, whatever comes back. A request with a
// body is replayed through its GetBody, which http.NewRequest sets for the
// usual in-memory bodies.
//
// A 429 or 503 with Retry-After, in seconds or as an HTTP-date, is waited
// out rather than the backoff's own delay, and spread by jitter as
// client.Retry spreads any server's hint: never earlier than asked, so a
// crowd told "in five seconds" does not come back all at once. A wait that
// would pass the request's deadline is not slept: the response is returned
// at once, as it is when the attempts run out, so the caller sees the
// server's answer, Retry-After and all. Those responses' bodies are read
// into memory (up to 64 KiB; a longer one ends the retries and is returned
// unread) so their connections go back to Base during the wait.
//
// When the request's ctx ends, RoundTrip returns at once with an error
// matching ctx's under errors.Is, leaving no timer behind. An error is a
// *client.RetryError, which says how many attempts were made and why it
// stopped, and wraps the last failure; one from Bucket, or from GetBody
// replaying the body, is returned as it is.
//
// With a Budget, retries and hedges are held to a share of requests
// across every client that shares it, so an outage is not made worse by
// the retries themselves. With a Hedge, a safe request whose answer is
// late is sent again to race the first (see Hedge).
//
// A request whose ctx carries a priority other than client.PriorityNormal
// (client.WithPriority) goes with it in PriorityHeader, replacing any
// value the request had, so the server's Adaptive gate sees it.
//
// Set Engine before use; the other fields have defaults. Without a
// Budget nothing bounds retries across requests, and without a Hedge
// nothing is hedged. A Transport is safe for concurrent use once its
// fields are set; do not change them afterwards. A Transport must not be
// copied after first use: it learns how late its hedge timers ring.
type Transport struct {
	// Base sends each attempt; nil is http.DefaultTransport.
	Base http.RoundTripper
	// Engine is the clock the waits are slept on (and Bucket's engine). It
	// is required: without it every RoundTrip fails with an error.
	Engine *client.Engine
	// Backoff says how many attempts, the first included, and how long to
	// wait between them when the server gives no Retry-After. A Backoff
	// whose Attempts is 0 or less, as in the zero Backoff, is read as
	// client.DefaultBackoff: three attempts, 100 ms doubling to 1 s.
	Backoff client.Backoff
	// Bucket, when set, is waited on before every attempt (client.Bucket's
	// Wait, first come, first served), so that one process does not send a
	// backend more than the bucket's rate however many goroutines call. A
	// wait that would pass the request's deadline fails the request at
	// once with a *client.WaitError.
	Bucket *client.Bucket
	// MaxWait is the longest Retry-After the Transport waits out; told to
	// wait longer, it returns the response at once. Zero or less is no cap
	// but the request's deadline.
	MaxWait time.Duration
	// Budget, when set, holds retries and hedges to a share of first
	// attempts (see client.Budget). Each request counts as one first
	// attempt. A retry the budget refuses is not sent: RoundTrip returns
	// the last response at once, as when the attempts run out. With no
	// response to return, the error matches client.ErrBudget under
	// errors.Is. The latency of each request's first attempt is counted
	// too, for Hedge. Share one Budget among all the clients of a backend.
	Budget *client.Budget
	// Hedge, when set, sends a copy of a slow request to race the first
	// (see client.Hedge). Nil sends none. Only requests Hedgeable allows
	// are hedged. An answer is what Transport would not retry: a failed
	// connection, or a 429, 502, 503 or 504, does not win while another
	// attempt is still out. A losing response is drained and closed.
	// The last hedge goes out on the caller's goroutine, and an answer of
	// another attempt cancels its request: Base must honour its request's
	// ctx, as http.Transport does, or the caller waits for that hedge.
	Hedge *client.Hedge

	lead hedge.Lead // how early the alarms for hedges are set
}

// maxRetryBody is the most of a retryable response's body read into
// memory. Refusals carry a line or a small problem+json object; a larger
// body is not worth holding through a wait.
const maxRetryBody = 64 << 10

var errNoEngine = errors.New("moonhttp: Transport.Engine is nil")

// RoundTrip sends req, again if it may and should (see Transport), and
// returns the last response. It blocks until then, or until req's ctx
// ends. It closes req's body, as an http.RoundTripper must, also on error.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.Engine == nil {
		closeBody(req)
		return nil, errNoEngine
	}
	req = withPriorityHeader(req)
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	b := t.Backoff
	if b.Attempts <= 0 {
		b = client.DefaultBackoff
	}
	once := !Retryable(req)
	if once {
		b.Attempts = 1
	}
	ctx := req.Context()
	rt := &roundTrip{t: t, base: base, req: req, once: once}
	if t.Hedge != nil && !once && Hedgeable(req) {
		rt.hedge = t.Hedge
	}
	var err error
	if t.Budget == nil {
		err = client.Retry(ctx, b, rt.attempt, client.SleepOn(t.Engine.Clock()))
	} else {
		err = client.Retry(ctx, b, rt.attempt, client.SleepOn(t.Engine.Clock()), client.WithBudget(t.Budget))
	}
	if !rt.sent {
		closeBody(req) // never handed to base, which would have closed it
	}
	if err == nil || (rt.resp != nil && ctx.Err() == nil) {
		return rt.resp, nil
	}
	return nil, err
}

// roundTrip is one RoundTrip's state across its attempts.
type roundTrip struct {
	t      *Transport
	base   http.RoundTripper
	req    *http.Request
	once   bool           // req may be sent only once: every answer is final
	sent   bool           // req itself (and its body) went to base
	resp   *http.Response // the latest attempt's response, nil if it failed
	hedge  *client.Hedge  // t.Hedge if req may be hedged, else nil
	hedges int            // hedges sent so far
}

// attempt sends the request once, and says by its error whether Retry
// should try again: nil for a final response, a hint for a Retry-After,
// Permanent for what another attempt cannot change. With a hedge due it
// races copies of the request instead (see race).
func (rt *roundTrip) attempt(ctx context.Context) error {
	rt.resp = nil // an earlier response, body in memory, is dropped
	if delay, lead, ok := rt.hedgeDelay(); ok {
		return rt.race(ctx, delay, lead)
	}
	first := !rt.sent
	r, err := rt.next(ctx)
	if err != nil {
		return err
	}
	var start int64
	if first && rt.t.Budget != nil {
		start = rt.t.Engine.Clock().Now()
	}
	resp, err := rt.base.RoundTrip(r)
	resp, err = rt.t.judge(ctx, rt.once, resp, err)
	if first && rt.t.Budget != nil && err == nil {
		rt.t.Budget.Observe(time.Duration(rt.t.Engine.Clock().Now() - start))
	}
	rt.resp = resp
	return err
}

// next is the request for the attempt about to go out on ctx, once
// the Bucket lets it: req itself the first time, then copies. Its error
// is Permanent.
func (rt *roundTrip) next(ctx context.Context) (*http.Request, error) {
	r := rt.req
	if rt.sent {
		var err error
		if r, err = rt.again(ctx); err != nil {
			return nil, client.Permanent(err)
		}
	} else if ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	if rt.t.Bucket != nil {
		if err := rt.t.Bucket.Wait(ctx); err != nil {
			if rt.sent {
				closeBody(r) // a body of its own, from GetBody
			}
			return nil, client.Permanent(err)
		}
	}
	rt.sent = true
	return r, nil
}

// again is a copy of the request for another attempt, on ctx, with its
// body had again through GetBody.
func (rt *roundTrip) again(ctx context.Context) (*http.Request, error) {
	r := rt.req.Clone(ctx)
	if rt.req.Body != nil && rt.req.Body != http.NoBody {
		body, err := rt.req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("moonhttp: replaying the request body: %w", err)
		}
		r.Body = body
	}
	return r, nil
}

// judge reads what one attempt brought back as attempt returns it: the
// response to keep, if any, and nil for a final answer, a hint for a
// Retry-After, Permanent for what another attempt cannot change, and
// any other error for what one may. ctx is the attempt's; once says
// every answer is final.
func (t *Transport) judge(ctx context.Context, once bool, resp *http.Response, err error) (*http.Response, error) {
	if err != nil {
		if ctx.Err() != nil {
			return nil, client.Permanent(err)
		}
		return nil, err
	}
	if once || !retryStatus(resp.StatusCode) {
		return resp, nil
	}
	small, err := hold(resp)
	if err != nil {
		return nil, err // the body broke off: as a failed connection
	}
	if !small {
		return resp, nil
	}
	failed := &statusError{status: resp.Status}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if wait, ok := RetryAfter(resp); ok {
			if t.MaxWait > 0 && wait > t.MaxWait {
				return resp, client.Permanent(failed)
			}
			return resp, client.RetryAfter(failed, wait)
		}
	}
	return resp, failed
}

// retryStatus is whether another attempt may get a different answer.
func retryStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// hold reads resp's body into memory and closes it, so the connection is
// free during the wait, and reports true; a body longer than maxRetryBody
// is left readable as it was (what was read put back in front) and hold
// reports false. A body that fails while being read is closed and its
// error returned.
func hold(resp *http.Response) (bool, error) {
	body := resp.Body
	buf, err := io.ReadAll(io.LimitReader(body, maxRetryBody+1))
	if err != nil {
		body.Close()
		return false, fmt.Errorf("moonhttp: reading a %s response: %w", resp.Status, err)
	}
	if len(buf) > maxRetryBody {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(buf), body), body}
		return false, nil
	}
	body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(buf))
	return true, nil
}

// statusError is a response another attempt may improve on.
type statusError struct{ status string }

func (e *statusError) Error() string { return "moonhttp: " + e.status }

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// Retryable reports whether Transport may send req more than once: its
// method is idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE: RFC 9110,
// section 9.2.2), or it carries an Idempotency-Key or X-Idempotency-Key
// header (as net/http's own transport reads them), or its ctx came from
// MarkRetryable; and its body, if any, can be had again through GetBody.
func Retryable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	if _, ok := req.Header["Idempotency-Key"]; ok {
		return true
	}
	if _, ok := req.Header["X-Idempotency-Key"]; ok {
		return true
	}
	marked, _ := req.Context().Value(retryableKey{}).(bool)
	return marked
}

type retryableKey struct{}

// MarkRetryable returns a ctx under which Transport treats a request as
// safe to send more than once, whatever its method: a POST whose server
// drops duplicates, say. The body must still be replayable (GetBody).
func MarkRetryable(ctx context.Context) context.Context {
	return context.WithValue(ctx, retryableKey{}, true)
}
