package moonhttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/internal/hedge/hedgetest"
	"github.com/moonpool-go/moonpool/moonhttp"
)

// within10s receives from ch, failing the test if nothing comes in ten
// seconds of real time.
func within10s[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("waited 10s for %s", what)
		panic("unreachable")
	}
}

// door is a server whose n-th request (from 1) is answered by steps[n-1]
// (the last step again past the end). It reports each request's number
// as it comes in, and again as its handler returns if the client went
// away first.
type door struct {
	steps   []http.HandlerFunc
	mu      sync.Mutex
	n       int
	arrived chan int
	gone    chan int
}

func newDoor(steps ...http.HandlerFunc) *door {
	return &door{steps: steps, arrived: make(chan int, 16), gone: make(chan int, 16)}
}

func (d *door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	d.n++
	n := d.n
	d.mu.Unlock()
	d.arrived <- n
	d.steps[min(n, len(d.steps))-1](w, r)
	if r.Context().Err() != nil {
		d.gone <- n
	}
}

// hang answers nothing until the client goes away.
func hang(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// TestTransportHedgeWins: a GET whose first attempt goes unanswered gets a
// hedge after the Delay, and the hedge's answer. The server sees the first
// attempt cancelled, and no timer is left.
func TestTransportHedgeWins(t *testing.T) {
	r := newRig(t)
	d := newDoor(hang, reply(200, "from the hedge"))
	srv, c := serve(t, d)
	tr := &moonhttp.Transport{Base: c.Transport, Engine: r.eng, Hedge: &client.Hedge{Delay: 50 * time.Millisecond}}
	done := make(chan result, 1)
	go func() { done <- do(&http.Client{Transport: tr}, newReq(t, "GET", srv.URL, "")) }()
	within10s(t, d.arrived, "the first attempt")
	if err := r.clock.WaitPending(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if next, _ := r.clock.Next(); next != 50*time.Millisecond {
		t.Fatalf("the hedge is due in %v, want 50ms", next)
	}
	r.clock.AdvanceNext()
	if n := within10s(t, d.arrived, "the hedge"); n != 2 {
		t.Fatalf("request %d arrived, want the hedge, 2", n)
	}
	res := within10s(t, done, "the answer")
	if res.err != nil || res.status != 200 || res.body != "from the hedge" {
		t.Fatalf("%+v, want the hedge's 200", res)
	}
	if n := within10s(t, d.gone, "the first attempt's cancellation"); n != 1 {
		t.Fatalf("request %d was cancelled, want the first", n)
	}
	if n := r.clock.Pending(); n != 0 {
		t.Fatalf("%d timers left", n)
	}
}

// TestTransportHedgeFirstWins: when the first attempt answers after the
// hedge went out, its answer is the one returned, and the server sees the
// hedge cancelled. An attempt that answers before the Delay sends no
// hedge at all.
func TestTransportHedgeFirstWins(t *testing.T) {
	r := newRig(t)
	release := make(chan struct{})
	late := func(w http.ResponseWriter, _ *http.Request) {
		<-release
		io.WriteString(w, "from the first")
	}
	d := newDoor(late, hang, reply(200, "at once"))
	srv, c := serve(t, d)
	tr := &moonhttp.Transport{Base: c.Transport, Engine: r.eng, Hedge: &client.Hedge{Delay: 50 * time.Millisecond}}
	hc := &http.Client{Transport: tr}
	done := make(chan result, 1)
	go func() { done <- do(hc, newReq(t, "GET", srv.URL, "")) }()
	within10s(t, d.arrived, "the first attempt")
	if err := r.clock.WaitPending(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	r.clock.AdvanceNext()
	within10s(t, d.arrived, "the hedge")
	close(release)
	if res := within10s(t, done, "the answer"); res.err != nil || res.body != "from the first" {
		t.Fatalf("%+v, want the first attempt's answer", res)
	}
	if n := within10s(t, d.gone, "the hedge's cancellation"); n != 2 {
		t.Fatalf("request %d was cancelled, want the hedge, 2", n)
	}

	registered := r.clock.Registered()
	go func() { done <- do(hc, newReq(t, "GET", srv.URL, "")) }()
	if res := within10s(t, done, "the answer"); res.err != nil || res.body != "at once" {
		t.Fatalf("%+v, want the answer that came at once", res)
	}
	if n := r.clock.Pending(); n != 0 {
		t.Fatalf("%d timers left", n)
	}
	if r.clock.Registered() != registered+1 {
		t.Fatalf("%d timers registered, want the one hedge timer", r.clock.Registered()-registered)
	}
}

// lagged is a backend on a synctest bubble's clock. Its n-th request
// (from 1) is answered after lag(n) with answer(n), a 200 with the body
// "answer n" when answer is nil. A request cancelled first fails with
// its ctx's error.
type lagged struct {
	lag    func(n int) time.Duration
	answer func(n int) (status int, body io.ReadCloser)
	start  time.Time

	mu   sync.Mutex
	reqs []sent
}

// sent is what a lagged backend saw of one request.
type sent struct {
	at        time.Duration // since the backend was made
	method    string
	cancelled bool
}

func newLagged(lag func(n int) time.Duration) *lagged {
	return &lagged{lag: lag, start: time.Now()}
}

func (l *lagged) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	l.mu.Lock()
	l.reqs = append(l.reqs, sent{at: time.Since(l.start), method: r.Method})
	n := len(l.reqs)
	l.mu.Unlock()
	timer := time.NewTimer(l.lag(n))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-r.Context().Done():
		l.mu.Lock()
		l.reqs[n-1].cancelled = true
		l.mu.Unlock()
		return nil, r.Context().Err()
	}
	status, body := http.StatusOK, io.NopCloser(strings.NewReader(fmt.Sprint("answer ", n)))
	if l.answer != nil {
		status, body = l.answer(n)
	}
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Header: http.Header{}, Body: body, Request: r}, nil
}

func (l *lagged) sent() []sent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]sent(nil), l.reqs...)
}

// always is a lag of d for every request.
func always(d time.Duration) func(int) time.Duration {
	return func(int) time.Duration { return d }
}

// lags is a lag by request number, from 1; past the end, the last.
func lags(ds ...time.Duration) func(int) time.Duration {
	return func(n int) time.Duration { return ds[min(n, len(ds))-1] }
}

// inBubble runs f in a synctest bubble with an engine on the bubble's
// clock, shut down when f returns.
func inBubble(t *testing.T, f func(t *testing.T, eng *client.Engine)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		eng := client.NewEngine()
		defer func() {
			if err := eng.Shutdown(context.Background()); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		}()
		f(t, eng)
	})
}

// roundTrip sends req through rt and reads the whole answer.
func roundTrip(rt http.RoundTripper, req *http.Request) result {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return result{resp.StatusCode, string(body), resp.Header, err}
}

// TestTransportHedgeOnlySafe: of requests whose first attempt is slow,
// only GET, HEAD and OPTIONS are hedged, with a body only if GetBody can
// give it again, and not when they ask for an upgrade. Everything else is
// sent once, however long it takes, even when it may be retried.
func TestTransportHedgeOnlySafe(t *testing.T) {
	tests := []struct {
		name  string
		req   func(t *testing.T) *http.Request
		sends int
	}{
		{"GET", func(t *testing.T) *http.Request { return newReq(t, "GET", "http://b.invalid/", "") }, 2},
		{"HEAD", func(t *testing.T) *http.Request { return newReq(t, "HEAD", "http://b.invalid/", "") }, 2},
		{"OPTIONS", func(t *testing.T) *http.Request { return newReq(t, "OPTIONS", "http://b.invalid/", "") }, 2},
		{"GET with a body", func(t *testing.T) *http.Request { return newReq(t, "GET", "http://b.invalid/", "q") }, 2},
		{"GET with a body without GetBody", func(t *testing.T) *http.Request {
			req := newReq(t, "GET", "http://b.invalid/", "q")
			req.GetBody = nil
			return req
		}, 1},
		{"GET asking for an upgrade", func(t *testing.T) *http.Request {
			req := newReq(t, "GET", "http://b.invalid/", "")
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			return req
		}, 1},
		{"POST", func(t *testing.T) *http.Request { return newReq(t, "POST", "http://b.invalid/", "pay 5") }, 1},
		{"PATCH", func(t *testing.T) *http.Request { return newReq(t, "PATCH", "http://b.invalid/", "pay 5") }, 1},
		{"PUT", func(t *testing.T) *http.Request { return newReq(t, "PUT", "http://b.invalid/", "x=1") }, 1},
		{"DELETE", func(t *testing.T) *http.Request { return newReq(t, "DELETE", "http://b.invalid/", "") }, 1},
		{"POST with an Idempotency-Key", func(t *testing.T) *http.Request {
			req := newReq(t, "POST", "http://b.invalid/", "pay 5")
			req.Header.Set("Idempotency-Key", "8e03978e")
			return req
		}, 1},
		{"POST marked retryable", func(t *testing.T) *http.Request {
			return newReq(t, "POST", "http://b.invalid/", "pay 5").WithContext(moonhttp.MarkRetryable(context.Background()))
		}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, eng *client.Engine) {
				l := newLagged(always(time.Second))
				tr := &moonhttp.Transport{Base: l, Engine: eng, Hedge: &client.Hedge{Delay: 10 * time.Millisecond}}
				req := tc.req(t)
				if got := moonhttp.Hedgeable(req); got != (tc.sends == 2) {
					t.Errorf("Hedgeable = %v", got)
				}
				start := time.Now()
				res := roundTrip(tr, req)
				if res.err != nil || res.status != 200 || res.body != "answer 1" {
					t.Fatalf("%+v, want the first attempt's answer", res)
				}
				if took := time.Since(start); took != time.Second {
					t.Errorf("took %v, want the first attempt's 1s", took)
				}
				if s := l.sent(); len(s) != tc.sends {
					t.Fatalf("sent %d times, want %d", len(s), tc.sends)
				}
			})
		})
	}
}

// TestTransportHedgeMax: while nothing answers, one hedge goes out each
// Delay until the request's Max is spent; Max 0 is 1. The first answer
// wins and every other attempt is cancelled.
func TestTransportHedgeMax(t *testing.T) {
	for _, c := range []struct{ max, sends int }{{0, 2}, {1, 2}, {3, 4}} {
		t.Run(fmt.Sprint("Max ", c.max), func(t *testing.T) {
			inBubble(t, func(t *testing.T, eng *client.Engine) {
				l := newLagged(lags(time.Second, time.Hour)) // the first answers at 1s, hedges never
				tr := &moonhttp.Transport{Base: l, Engine: eng, Hedge: &client.Hedge{Delay: 100 * time.Millisecond, Max: c.max}}
				res := roundTrip(tr, newReq(t, "GET", "http://b.invalid/", ""))
				if res.err != nil || res.body != "answer 1" {
					t.Fatalf("%+v, want the first attempt's answer", res)
				}
				synctest.Wait() // the hedges see their cancellation
				s := l.sent()
				if len(s) != c.sends {
					t.Fatalf("sent %d times, want %d", len(s), c.sends)
				}
				for i, q := range s {
					if want := time.Duration(i) * 100 * time.Millisecond; q.at != want {
						t.Errorf("attempt %d sent at %v, want %v", i+1, q.at, want)
					}
					if q.cancelled != (i > 0) {
						t.Errorf("attempt %d cancelled: %v", i+1, q.cancelled)
					}
				}
			})
		})
	}
}

// TestTransportHedgeLoserClosed: an attempt that answers after another
// won has its response body drained and closed, never left open.
func TestTransportHedgeLoserClosed(t *testing.T) {
	inBubble(t, func(t *testing.T, eng *client.Engine) {
		bodies := []*closeCounter{
			{Reader: strings.NewReader("late")},
			{Reader: strings.NewReader("from the hedge")},
		}
		release := make(chan struct{})
		var mu sync.Mutex
		calls := 0
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			n := calls
			calls++
			mu.Unlock()
			if n == 0 {
				// The first attempt: its answer is already on its way
				// when the hedge wins, and comes whatever its ctx says.
				<-release
			}
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: bodies[n], Request: r}, nil
		})
		tr := &moonhttp.Transport{Base: base, Engine: eng, Hedge: &client.Hedge{Delay: 100 * time.Millisecond}}
		req := newReq(t, "GET", "http://b.invalid/", "")
		res := roundTrip(tr, req)
		if res.err != nil || res.body != "from the hedge" {
			t.Fatalf("%+v, want the hedge's answer", res)
		}
		if bodies[1].closed != 1 {
			t.Fatalf("the winner's body closed %d times, want once, by the caller", bodies[1].closed)
		}
		close(release)
		synctest.Wait()
		if bodies[0].closed != 1 {
			t.Fatalf("the loser's body closed %d times, want once", bodies[0].closed)
		}
		if rest, _ := io.ReadAll(bodies[0]); len(rest) != 0 {
			t.Fatalf("the loser's body was closed with %q unread", rest)
		}
	})
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestTransportHedgeFailureIsNoAnswer: a hedge that comes back with a 503
// does not beat a slower 200. When every attempt out fails, the request
// is retried as any failure is.
func TestTransportHedgeFailureIsNoAnswer(t *testing.T) {
	inBubble(t, func(t *testing.T, eng *client.Engine) {
		l := newLagged(lags(time.Second, 0))
		l.answer = func(n int) (int, io.ReadCloser) {
			if n == 2 {
				return 503, io.NopCloser(strings.NewReader("busy"))
			}
			return 200, io.NopCloser(strings.NewReader(fmt.Sprint("answer ", n)))
		}
		tr := &moonhttp.Transport{Base: l, Engine: eng, Hedge: &client.Hedge{Delay: 100 * time.Millisecond}}
		start := time.Now()
		res := roundTrip(tr, newReq(t, "GET", "http://b.invalid/", ""))
		if res.err != nil || res.body != "answer 1" || time.Since(start) != time.Second {
			t.Fatalf("%+v after %v, want the first attempt's 200 at 1s", res, time.Since(start))
		}

		l = newLagged(always(300 * time.Millisecond))
		l.answer = func(n int) (int, io.ReadCloser) {
			if n <= 2 {
				return 503, io.NopCloser(strings.NewReader("busy"))
			}
			return 200, io.NopCloser(strings.NewReader(fmt.Sprint("answer ", n)))
		}
		tr.Base = l
		res = roundTrip(tr, newReq(t, "GET", "http://b.invalid/", ""))
		if res.err != nil || res.body != "answer 3" {
			t.Fatalf("%+v, want the retry's answer", res)
		}
		if s := l.sent(); len(s) != 3 {
			t.Fatalf("sent %d times, want the attempt, its hedge and one retry", len(s))
		}
	})
}

// TestTransportHedgeCancel: a ctx that ends during a race ends the
// request at once with ctx's error, and cancels every attempt.
func TestTransportHedgeCancel(t *testing.T) {
	inBubble(t, func(t *testing.T, eng *client.Engine) {
		l := newLagged(always(time.Hour))
		tr := &moonhttp.Transport{Base: l, Engine: eng, Hedge: &client.Hedge{Delay: 100 * time.Millisecond}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		res := roundTrip(tr, newReq(t, "GET", "http://b.invalid/", "").WithContext(ctx))
		if !errors.Is(res.err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Fatalf("%+v after %v, want the deadline's error at 1s", res, time.Since(start))
		}
		synctest.Wait()
		for i, q := range l.sent() {
			if !q.cancelled {
				t.Errorf("attempt %d not cancelled", i+1)
			}
		}
	})
}

// TestTransportHedgeRefused: a hedge the budget refuses is not sent, and
// no other follows for that request; one it allows is.
func TestTransportHedgeRefused(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   client.BudgetConfig
		sends int
		stats client.BudgetStats
	}{
		// A tenth of one first attempt is no whole hedge, and no floor.
		{"refused", client.BudgetConfig{Ratio: 0.1, MinPerSecond: -1}, 1, client.BudgetStats{Firsts: 1, RefusedHedges: 1}},
		// One first attempt allows one hedge: the second is refused.
		{"allowed once", client.BudgetConfig{Ratio: 1, MinPerSecond: -1}, 2, client.BudgetStats{Firsts: 1, Hedges: 1, RefusedHedges: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, eng *client.Engine) {
				b, err := client.NewBudget(eng, c.cfg)
				if err != nil {
					t.Fatal(err)
				}
				l := newLagged(lags(time.Second, time.Hour))
				tr := &moonhttp.Transport{Base: l, Engine: eng, Budget: b, Hedge: &client.Hedge{Delay: 100 * time.Millisecond, Max: 3}}
				if res := roundTrip(tr, newReq(t, "GET", "http://b.invalid/", "")); res.body != "answer 1" {
					t.Fatalf("%+v, want the first attempt's answer", res)
				}
				synctest.Wait()
				if s := l.sent(); len(s) != c.sends {
					t.Fatalf("sent %d times, want %d", len(s), c.sends)
				}
				if got := counts(b.Stats()); got != counts(c.stats) {
					t.Fatalf("budget %+v, want %+v", got, c.stats)
				}
			})
		})
	}
}

// TestTransportHedgeDelayFromBudget: with no Delay, the first attempts'
// latencies the budget has seen say when to hedge. Until it has seen
// enough of them no request is hedged, however slow.
func TestTransportHedgeDelayFromBudget(t *testing.T) {
	inBubble(t, func(t *testing.T, eng *client.Engine) {
		b, err := client.NewBudget(eng, client.BudgetConfig{})
		if err != nil {
			t.Fatal(err)
		}
		slow := 0 // the number of the request whose first attempt takes 5s
		l := newLagged(func(n int) time.Duration {
			if n == slow {
				return 5 * time.Second
			}
			return 20 * time.Millisecond
		})
		tr := &moonhttp.Transport{Base: l, Engine: eng, Budget: b, Hedge: &client.Hedge{}}
		get := func() time.Duration {
			start := time.Now()
			if res := roundTrip(tr, newReq(t, "GET", "http://b.invalid/", "")); res.err != nil || res.status != 200 {
				t.Fatalf("%+v", res)
			}
			return time.Since(start)
		}
		for range 50 {
			get()
		}
		slow = 51
		if took := get(); took != 5*time.Second {
			t.Fatalf("with 50 latencies seen, a slow request took %v, want 5s unhedged", took)
		}
		for range 100 {
			get()
		}
		// The budget's actor folds the last latencies in on its own
		// goroutine; once it rests, its quote is the one a request reads.
		synctest.Wait()
		// Within a bucket's width, a sixteenth of the value.
		d, ok := b.HedgeDelay(0.95)
		if !ok || d < 20*time.Millisecond*15/16 || d > 20*time.Millisecond*17/16 {
			t.Fatalf("after 150 requests of 20ms the budget's p95 is %v, %v", d, ok)
		}
		slow = len(l.sent()) + 1
		took := get()
		if took != d+20*time.Millisecond {
			t.Fatalf("a slow request took %v, want its hedge's answer at the p95 (%v) and 20ms more", took, d)
		}
		synctest.Wait()
		if s := l.sent(); len(s) != slow+1 || !s[slow-1].cancelled {
			t.Fatalf("%d sent, the slow one cancelled: %v; want its hedge sent and it cancelled", len(s), s[slow-1].cancelled)
		}
	})
}

// TestTransportBudgetRefusesRetry: a retry the budget refuses is not
// made. The caller gets the last response at once, as the server sent it,
// or with no response, an error matching client.ErrBudget and the failure.
func TestTransportBudgetRefusesRetry(t *testing.T) {
	r, s, c, url, tr := transportRig(t, reply(503, "down for now"), reply(200, "ok"))
	b, err := client.NewBudget(r.eng, client.BudgetConfig{Ratio: 0.1, MinPerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	tr.Budget = b
	// Nothing moves the clock: a retry that slept would never come back.
	done := make(chan result, 1)
	go func() { done <- do(c, newReq(t, "GET", url, "")) }()
	res := within10s(t, done, "the refused retry's answer")
	if res.err != nil || res.status != 503 || res.body != "down for now" {
		t.Fatalf("%+v, want the 503 as sent", res)
	}
	if n := len(s.requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
	if got := counts(b.Stats()); got != counts(client.BudgetStats{Firsts: 1, RefusedRetries: 1}) {
		t.Fatalf("budget %+v, want one first attempt and one refused retry", got)
	}

	refused := errors.New("connection refused")
	tr.Base = roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, refused })
	go func() { done <- do(c, newReq(t, "GET", url, "")) }()
	res = within10s(t, done, "the refused retry's error")
	if !errors.Is(res.err, client.ErrBudget) || !errors.Is(res.err, refused) {
		t.Fatalf("%v, want ErrBudget and the failure", res.err)
	}
}

// counts are st's counters, without what it says is left.
func counts(st client.BudgetStats) [5]int64 {
	return [5]int64{st.Firsts, st.Retries, st.Hedges, st.RefusedRetries, st.RefusedHedges}
}

// TestTransportBudgetOutage: in a total outage the budget holds the
// attempts per request near 1 + Ratio, whatever Backoff.Attempts says,
// where without it each request is tried Attempts times.
func TestTransportBudgetOutage(t *testing.T) {
	const requests = 300 // at 100 a second: three seconds of a 10s window
	for _, withBudget := range []bool{false, true} {
		t.Run(fmt.Sprint("budget ", withBudget), func(t *testing.T) {
			inBubble(t, func(t *testing.T, eng *client.Engine) {
				l := newLagged(always(0))
				l.answer = func(int) (int, io.ReadCloser) { return 503, io.NopCloser(strings.NewReader("")) }
				backoff := client.DefaultBackoff
				backoff.Attempts = 5
				tr := &moonhttp.Transport{Base: l, Engine: eng, Backoff: backoff}
				var b *client.Budget
				if withBudget {
					var err error
					if b, err = client.NewBudget(eng, client.BudgetConfig{}); err != nil {
						t.Fatal(err)
					}
					tr.Budget = b
				}
				start := time.Now()
				var wg sync.WaitGroup
				for range requests {
					wg.Go(func() {
						if res := roundTrip(tr, newReq(t, "GET", "http://b.invalid/", "")); res.status != 503 {
							t.Errorf("%+v, want the 503", res)
						}
					})
					time.Sleep(10 * time.Millisecond)
				}
				wg.Wait()
				took := time.Since(start)
				perRequest := float64(len(l.sent())) / requests
				if !withBudget {
					if perRequest != 5 {
						t.Fatalf("%.2f attempts per request, want all 5", perRequest)
					}
					return
				}
				// All in one window: retries ≤ max(Ratio × firsts, MinPerSecond × Window).
				if took >= 10*time.Second {
					t.Fatalf("took %v, past one window", took)
				}
				if limit := 1 + max(0.1*requests, 10)/requests; perRequest > limit {
					t.Fatalf("%.3f attempts per request, want at most %.3f", perRequest, limit)
				}
				st := b.Stats()
				if st.Firsts != requests || st.Retries+requests != int64(len(l.sent())) || st.RefusedRetries == 0 {
					t.Fatalf("budget %+v after %d attempts", st, len(l.sent()))
				}
			})
		})
	}
}

// TestTransportOffAllocates: with no Budget and no Hedge, a request that
// succeeds at once allocates no more than client.Retry itself. A Budget,
// and a Hedge whose delay is not known yet, add nothing to that.
func TestTransportOffAllocates(t *testing.T) {
	r := newRig(t)
	resp := &http.Response{StatusCode: 200, Body: http.NoBody}
	tr := &moonhttp.Transport{Base: roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil }), Engine: r.eng}
	req := newReq(t, "GET", "http://b.invalid/", "")
	ok := func(context.Context) error { return nil }
	retry := testing.AllocsPerRun(1000, func() {
		client.Retry(context.Background(), client.DefaultBackoff, ok, client.SleepOn(r.eng.Clock()))
	})
	if n := testing.AllocsPerRun(1000, func() { tr.RoundTrip(req) }); n > retry {
		t.Fatalf("%v allocations a request, want no more than client.Retry's %v", n, retry)
	}
	b, err := client.NewBudget(r.eng, client.BudgetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	tr.Budget, tr.Hedge = b, &client.Hedge{}
	if n := testing.AllocsPerRun(1000, func() { tr.RoundTrip(req) }); n > retry {
		t.Fatalf("with a budget, %v allocations a request, want no more than client.Retry's %v", n, retry)
	}
}

// TestTransportHedgeLead: the hedges of a fixed Delay are set early by
// how late the timers ring, those past a quantile are not (see
// hedgetest.Lead).
func TestTransportHedgeLead(t *testing.T) {
	hedgetest.Lead(t, func(t *testing.T, eng *client.Engine, b *client.Budget, h *client.Hedge, k *hedgetest.Backend) func() {
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if err := k.Attempt(r.Context()); err != nil {
				return nil, err
			}
			return &http.Response{StatusCode: 200, Status: "OK", Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
		})
		tr := &moonhttp.Transport{Base: base, Engine: eng, Budget: b, Hedge: h}
		return func() {
			req, err := http.NewRequest("GET", "http://b.invalid/", nil)
			if err != nil {
				t.Error(err)
				return
			}
			if res := roundTrip(tr, req); res.err != nil || res.status != 200 {
				t.Errorf("%+v", res)
			}
		}
	})
}
