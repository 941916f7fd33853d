package moonhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moonhttp"
)

// script is a server that answers its i-th request with steps[i] (the last
// step again past the end), recording each request as it came.
type script struct {
	r     *rig
	steps []http.HandlerFunc
	mu    sync.Mutex
	seen  []seen
}

type seen struct {
	at     time.Duration // on the rig's clock
	method string
	body   string
}

func (s *script) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	s.mu.Lock()
	s.seen = append(s.seen, seen{s.r.at(), req.Method, string(body)})
	step := s.steps[min(len(s.seen), len(s.steps))-1]
	s.mu.Unlock()
	step(w, req)
}

func (s *script) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.seen...)
}

// reply answers code with the headers given as name, value pairs and body.
func reply(code int, body string, hdr ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

// transportRig is a scripted server and a client whose transport is a
// moonhttp.Transport on the rig's engine.
func transportRig(t *testing.T, steps ...http.HandlerFunc) (*rig, *script, *http.Client, string, *moonhttp.Transport) {
	r := newRig(t)
	s := &script{r: r, steps: steps}
	srv, c := serve(t, s)
	tr := &moonhttp.Transport{Base: c.Transport, Engine: r.eng}
	return r, s, &http.Client{Transport: tr}, srv.URL, tr
}

// result is what a request came back with.
type result struct {
	status int
	body   string
	header http.Header
	err    error
}

func do(c *http.Client, req *http.Request) result {
	resp, err := c.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return result{resp.StatusCode, string(body), resp.Header, err}
}

func newReq(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// within fails unless d lies in [lo, hi].
func within(t *testing.T, what string, d, lo, hi time.Duration) {
	t.Helper()
	if d < lo || d > hi {
		t.Errorf("%s: %v, want between %v and %v", what, d, lo, hi)
	}
}

// TestTransportRetryAfterSeconds: a 429 with Retry-After: 3 is waited out,
// never less than asked and spread by at most a tenth of it (the default
// backoff's first ceiling, 100 ms, is less), and the second attempt's
// answer is what the caller gets.
func TestTransportRetryAfterSeconds(t *testing.T) {
	r, s, c, url, _ := transportRig(t,
		reply(429, "busy", "Retry-After", "3"),
		reply(200, "ok"))
	var res result
	moves := r.drive(func() { res = do(c, newReq(t, "GET", url, "")) })
	if res.err != nil || res.status != 200 || res.body != "ok" {
		t.Fatalf("%+v, want 200 ok", res)
	}
	if len(moves) != 1 {
		t.Fatalf("slept %v, want once", moves)
	}
	within(t, "the wait", moves[0], 3*time.Second, 3300*time.Millisecond)
	reqs := s.requests()
	if len(reqs) != 2 || reqs[1].at != moves[0] {
		t.Fatalf("requests %+v, want the second after the wait", reqs)
	}
}

// TestTransportRetryAfterDate: the HTTP-date form, read against the
// response's Date, so the wait is the server's five seconds whatever the
// local clock says.
func TestTransportRetryAfterDate(t *testing.T) {
	r, s, c, url, _ := transportRig(t,
		reply(503, "", "Date", "Sun, 06 Nov 1994 08:49:37 GMT", "Retry-After", "Sun, 06 Nov 1994 08:49:42 GMT"),
		reply(200, "ok"))
	var res result
	moves := r.drive(func() { res = do(c, newReq(t, "GET", url, "")) })
	if res.status != 200 || len(moves) != 1 || len(s.requests()) != 2 {
		t.Fatalf("%+v after waits %v and %d requests; want 200 after one wait, 2 requests", res, moves, len(s.requests()))
	}
	within(t, "the wait", moves[0], 5*time.Second, 5500*time.Millisecond)
}

// TestTransportBackoff: without a hint the backoff's own delays are slept,
// each under its ceiling, and a 502 or 504 is retried like a 503.
func TestTransportBackoff(t *testing.T) {
	r, s, c, url, _ := transportRig(t, reply(502, ""), reply(504, ""), reply(200, "ok"))
	var res result
	moves := r.drive(func() { res = do(c, newReq(t, "GET", url, "")) })
	if res.status != 200 || len(s.requests()) != 3 || len(moves) > 2 {
		t.Fatalf("%+v after %d requests and waits %v", res, len(s.requests()), moves)
	}
	for i, m := range moves {
		within(t, "a wait", m, 0, client.DefaultBackoff.Ceiling(i+1))
	}
}

// TestTransportExhausted: when the attempts run out the last response is
// returned as the server sent it, body, Retry-After and all.
func TestTransportExhausted(t *testing.T) {
	r, s, c, url, tr := transportRig(t, reply(503, "down for now", "Retry-After", "1"))
	tr.Backoff = client.Backoff{Attempts: 4}
	var res result
	moves := r.drive(func() { res = do(c, newReq(t, "GET", url, "")) })
	if res.err != nil || res.status != 503 || res.body != "down for now" || res.header.Get("Retry-After") != "1" {
		t.Fatalf("%+v, want the last 503 as sent", res)
	}
	if len(s.requests()) != 4 || len(moves) != 3 {
		t.Fatalf("%d requests and waits %v, want 4 and 3", len(s.requests()), moves)
	}
}

// TestTransportNotIdempotent: a POST is sent once, whatever comes back,
// unless it says it is safe to repeat (MarkRetryable, an Idempotency-Key),
// and then its body is sent again, whole. A body that cannot be had again
// is never sent twice, marked or not.
func TestTransportNotIdempotent(t *testing.T) {
	tests := []struct {
		name     string
		req      func(t *testing.T, url string) *http.Request
		attempts int
	}{
		{"POST", func(t *testing.T, url string) *http.Request { return newReq(t, "POST", url, "pay 5") }, 1},
		{"PATCH", func(t *testing.T, url string) *http.Request { return newReq(t, "PATCH", url, "pay 5") }, 1},
		{"POST marked", func(t *testing.T, url string) *http.Request {
			return newReq(t, "POST", url, "pay 5").WithContext(moonhttp.MarkRetryable(context.Background()))
		}, 2},
		{"POST with an Idempotency-Key", func(t *testing.T, url string) *http.Request {
			req := newReq(t, "POST", url, "pay 5")
			req.Header.Set("Idempotency-Key", "8e03978e")
			return req
		}, 2},
		{"PUT", func(t *testing.T, url string) *http.Request { return newReq(t, "PUT", url, "pay 5") }, 2},
		{"PUT, body without GetBody", func(t *testing.T, url string) *http.Request {
			req := newReq(t, "PUT", url, "pay 5")
			req.GetBody = nil
			return req
		}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, s, c, url, _ := transportRig(t, reply(503, "", "Retry-After", "1"), reply(200, "done"))
			var res result
			moves := r.drive(func() { res = do(c, tc.req(t, url)) })
			reqs := s.requests()
			if len(reqs) != tc.attempts || len(moves) != tc.attempts-1 {
				t.Fatalf("%d requests, waits %v; want %d requests", len(reqs), moves, tc.attempts)
			}
			for i, q := range reqs {
				if q.body != "pay 5" {
					t.Errorf("request %d had body %q", i, q.body)
				}
			}
			if want := []int{0, 503, 200}[tc.attempts]; res.status != want {
				t.Fatalf("%+v, want %d", res, want)
			}
			if r.clock.Pending() != 0 {
				t.Fatal("a timer was left behind")
			}
		})
	}
}

// TestTransportDeadline: a Retry-After that would pass the request's
// deadline is not slept: the response comes back at once.
func TestTransportDeadline(t *testing.T) {
	r, s, c, url, _ := transportRig(t, reply(429, "later", "Retry-After", "10"), reply(200, "ok"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var res result
	moves := r.drive(func() { res = do(c, newReq(t, "GET", url, "").WithContext(ctx)) })
	if res.err != nil || res.status != 429 || res.body != "later" || len(moves) != 0 || len(s.requests()) != 1 {
		t.Fatalf("%+v after waits %v and %d requests; want the 429 at once", res, moves, len(s.requests()))
	}
}

// TestTransportMaxWait: told to wait longer than MaxWait, the Transport
// returns the response instead.
func TestTransportMaxWait(t *testing.T) {
	r, s, c, url, tr := transportRig(t, reply(503, "", "Retry-After", "120"), reply(200, "ok"))
	tr.MaxWait = time.Minute
	var res result
	moves := r.drive(func() { res = do(c, newReq(t, "GET", url, "")) })
	if res.status != 503 || len(moves) != 0 || len(s.requests()) != 1 {
		t.Fatalf("%+v after waits %v and %d requests; want the 503 at once", res, moves, len(s.requests()))
	}
}

// TestTransportCancel: a ctx that ends during a wait ends the request at
// once with ctx's error, and leaves no timer.
func TestTransportCancel(t *testing.T) {
	r, s, c, url, _ := transportRig(t, reply(503, "", "Retry-After", "30"), reply(200, "ok"))
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan result, 1)
	go func() { out <- do(c, newReq(t, "GET", url, "").WithContext(ctx)) }()
	if err := r.clock.WaitPending(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	res := <-out
	if !errors.Is(res.err, context.Canceled) {
		t.Fatalf("%+v, want context.Canceled", res)
	}
	var re *client.RetryError
	if !errors.As(res.err, &re) || re.Attempts != 1 {
		t.Fatalf("%v: want a *client.RetryError after 1 attempt", res.err)
	}
	if n := r.clock.Pending(); n != 0 || len(s.requests()) != 1 {
		t.Fatalf("%d timers left, %d requests; want none and 1", n, len(s.requests()))
	}
}

// TestTransportBrokenConnection: a connection that fails before any answer
// is tried again.
func TestTransportBrokenConnection(t *testing.T) {
	hangUp := func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	r, s, c, url, _ := transportRig(t, hangUp, reply(200, "ok"))
	var res result
	r.drive(func() { res = do(c, newReq(t, "GET", url, "")) })
	if res.err != nil || res.status != 200 || len(s.requests()) != 2 {
		t.Fatalf("%+v after %d requests, want 200 after 2", res, len(s.requests()))
	}
}

// TestTransportLargeBody: a refusal too long to hold in memory ends the
// retries, and reaches the caller whole.
func TestTransportLargeBody(t *testing.T) {
	big := strings.Repeat("x", 100<<10)
	r, s, c, url, _ := transportRig(t, reply(503, big, "Retry-After", "1"), reply(200, "ok"))
	var res result
	r.drive(func() { res = do(c, newReq(t, "GET", url, "")) })
	if res.err != nil || res.status != 503 || res.body != big || len(s.requests()) != 1 {
		t.Fatalf("status %d, %d bytes, %d requests, %v; want the 503 whole, once", res.status, len(res.body), len(s.requests()), res.err)
	}
}

// TestTransportBucket: with a client-side bucket of one a second, requests
// leave one second apart however fast they are made.
func TestTransportBucket(t *testing.T) {
	r, s, c, url, tr := transportRig(t, reply(200, "ok"))
	b, err := client.NewBucket(r.eng, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	tr.Bucket = b
	r.drive(func() {
		for range 3 {
			if res := do(c, newReq(t, "GET", url, "")); res.status != 200 {
				t.Errorf("%+v", res)
			}
		}
	})
	reqs := s.requests()
	if len(reqs) != 3 || reqs[0].at != 0 || reqs[1].at != time.Second || reqs[2].at != 2*time.Second {
		t.Fatalf("requests %+v, want at 0, 1 s and 2 s", reqs)
	}
}

// closeCounter is a request body that counts its Closes.
type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// TestTransportNoEngine: without an engine the request fails with an
// error, and its body is closed all the same.
func TestTransportNoEngine(t *testing.T) {
	body := &closeCounter{Reader: strings.NewReader("x")}
	req, _ := http.NewRequest("POST", "http://127.0.0.1:1/", body)
	resp, err := (&moonhttp.Transport{}).RoundTrip(req)
	if resp != nil || err == nil || body.closed != 1 {
		t.Fatalf("%v, %v, body closed %d times; want an error and one Close", resp, err, body.closed)
	}
}
