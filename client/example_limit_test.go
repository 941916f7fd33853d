package client_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moontest"
)

// A bucket of two a second with bursts of three: the burst goes through,
// the fourth caller is told when to come back, and half a second later
// there is a token again. (A virtual clock stands in for time here; a
// server uses client.NewEngine() and the real one.)
func ExampleBucket() {
	clock := moontest.NewClock(nil)
	eng := client.NewEngine(client.WithClock(clock))
	defer eng.Shutdown(context.Background())

	b, _ := client.NewBucket(eng, 2, 3)
	fmt.Println(b.Allow(), b.Allow(), b.Allow())
	d := b.Try()
	fmt.Println(d.OK, "wait", d.Wait, "Retry-After:", d.RetryAfter())
	clock.Advance(500 * time.Millisecond)
	fmt.Println(b.Allow())
	// Output:
	// true true true
	// false wait 500ms Retry-After: 1
	// true
}

// The Retry-After recipe: one call decides and says, from the same
// decision, how long to wait and what is left, so the header never reads
// 0 for a refusal, nor a number of centuries once the limiter is closed.
func ExampleKeyedBucket_Try() {
	clock := moontest.NewClock(nil)
	eng := client.NewEngine(client.WithClock(clock))
	defer eng.Shutdown(context.Background())

	limit, _ := client.NewKeyedBucket(eng, 0.4, 2) // per client: one every 2.5s, bursts of 2
	handler := func(w http.ResponseWriter, r *http.Request) {
		d := limit.Try(r.Header.Get("X-Client"))
		w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(d.Left))
		if !d.OK {
			w.Header().Set("Retry-After", strconv.Itoa(d.RetryAfter()))
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, "hello")
	}
	call := func() {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-Client", "ann")
		rec := httptest.NewRecorder()
		handler(rec, req)
		fmt.Println(rec.Code, "Retry-After:", rec.Header().Get("Retry-After"), "Remaining:", rec.Header().Get("X-RateLimit-Remaining"))
	}
	call()
	call()
	call()
	limit.Close(context.Background())
	call()
	// Output:
	// 200 Retry-After:  Remaining: 1
	// 200 Retry-After:  Remaining: 0
	// 429 Retry-After: 3 Remaining: 0
	// 429 Retry-After: 86400 Remaining: 0
}

// Wait returns at once when the wait would outlast the caller's deadline,
// saying how long it would have been.
func ExampleBucket_Wait() {
	clock := moontest.NewClock(nil)
	eng := client.NewEngine(client.WithClock(clock))
	defer eng.Shutdown(context.Background())

	b, _ := client.NewBucket(eng, 1.0/60, 1) // one a minute
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fmt.Println(b.Wait(ctx)) // the burst
	err := b.Wait(ctx)
	var we *client.WaitError
	fmt.Println(errors.Is(err, client.ErrExceedsDeadline), errors.As(err, &we) && we.Wait > 59*time.Second)
	// Output:
	// <nil>
	// true true
}

// A quota of three an hour counts events, not a rate: the three go at
// once, and the fourth waits for the first to be an hour old.
func ExampleWindow() {
	clock := moontest.NewClock(nil)
	eng := client.NewEngine(client.WithClock(clock))
	defer eng.Shutdown(context.Background())

	w, _ := client.NewWindow(eng, 3, time.Hour)
	for range 4 {
		fmt.Print(w.Allow(), " ")
	}
	fmt.Println("left:", w.Left())
	clock.Advance(time.Hour)
	fmt.Println("an hour on, left:", w.Left())
	// Output:
	// true true true false left: 0
	// an hour on, left: 3
}

// One limit per client: a noisy client spends its own tokens, not
// everyone's.
func ExampleKeyedBucket() {
	eng := client.NewEngine()
	defer eng.Shutdown(context.Background())

	perClient, _ := client.NewKeyedBucket(eng, 1, 2)
	for _, who := range []string{"noisy", "noisy", "noisy", "quiet"} {
		fmt.Println(who, perClient.Allow(who))
	}
	// Output:
	// noisy true
	// noisy true
	// noisy false
	// quiet true
}

// A gate answers "busy" rather than queueing: past the limit a server
// sheds instead of piling work up.
func ExampleGate() {
	eng := client.NewEngine()
	defer eng.Shutdown(context.Background())

	g, _ := client.NewGate(eng, 2)
	fmt.Println(g.Enter(), g.Enter(), g.Enter()) // the third is told no
	g.Leave()
	fmt.Println(g.Enter(), g.Held())
	// Output:
	// true true false
	// true 2
}

// Retry sleeps the backoff's schedule on the engine's clock; with a seeded
// source the schedule is the same every run.
func ExampleRetry() {
	clock := moontest.NewClock(nil)
	eng := client.NewEngine(client.WithClock(clock))
	defer eng.Shutdown(context.Background())
	defer clock.FastForward()()

	start := clock.Now()
	b := client.Backoff{Base: 100 * time.Millisecond, Factor: 2, Cap: time.Second, Attempts: 4, Jitter: client.Rigid}
	err := client.Retry(context.Background(), b, func(ctx context.Context) error {
		fmt.Println("attempt at", time.Duration(clock.Now()-start))
		return errors.New("connection refused")
	}, client.SleepOn(eng.Clock()), client.WithSource(rand.New(rand.NewPCG(1, 2))))
	fmt.Println(err)
	// Output:
	// attempt at 0s
	// attempt at 100ms
	// attempt at 300ms
	// attempt at 700ms
	// moonpool: retry: gave up after 4 attempts: connection refused
}

// A server's "retry after 2s" is honoured, never early, and spread so a
// crowd told the same does not come back as one.
func ExampleRetryAfter() {
	clock := moontest.NewClock(nil)
	eng := client.NewEngine(client.WithClock(clock))
	defer eng.Shutdown(context.Background())
	defer clock.FastForward()()

	start := clock.Now()
	var back time.Duration
	calls := 0
	err := client.Retry(context.Background(), client.DefaultBackoff, func(ctx context.Context) error {
		calls++
		if calls == 1 {
			return client.RetryAfter(errors.New("503 busy"), 2*time.Second)
		}
		back = time.Duration(clock.Now() - start)
		return nil
	}, client.SleepOn(eng.Clock()))
	fmt.Println(err, back >= 2*time.Second, back <= 2*time.Second+200*time.Millisecond)
	// Output:
	// <nil> true true
}

// A permanent error is not retried: Retry returns it at once.
func ExamplePermanent() {
	errBadRequest := errors.New("400 bad request")
	calls := 0
	err := client.Retry(context.Background(), client.DefaultBackoff, func(ctx context.Context) error {
		calls++
		return client.Permanent(errBadRequest)
	})
	fmt.Println(err == errBadRequest, calls)
	// Output:
	// true 1
}
