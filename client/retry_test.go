package client_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/policy"
)

// retryRig runs Retry on an engine with a virtual clock, recording the
// instant of every attempt, and moves time on whenever Retry sleeps.
type retryRig struct {
	t     *testing.T
	clock *vclock.Virtual
	eng   *engine.Engine
	t0    int64
	calls []int64 // instants of fn's runs; read once Retry has returned
}

func newRetryRig(t *testing.T) *retryRig {
	t.Helper()
	clock := vclock.NewVirtual()
	eng := engine.New(engine.WithClock(clock))
	t.Cleanup(func() { _ = eng.Shutdown(context.Background()) })
	return &retryRig{t: t, clock: clock, eng: eng, t0: clock.Now()}
}

// run calls Retry with fn (told its attempt number, from 1) and fires each
// sleep's timer as soon as it is set, until Retry returns.
func (r *retryRig) run(ctx context.Context, b policy.Backoff, fn func(attempt int) error, opts ...client.RetryOption) error {
	r.t.Helper()
	r.calls = nil
	out := make(chan error, 1)
	go func() {
		out <- client.Retry(ctx, b, func(context.Context) error {
			r.calls = append(r.calls, r.clock.Now())
			return fn(len(r.calls))
		}, append(opts, client.SleepOn(r.eng.Clock()))...)
	}()
	net, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		waiting, stop := context.WithCancel(net)
		pend := make(chan error, 1)
		go func() { pend <- r.clock.WaitPending(waiting, 1) }()
		select {
		case err := <-out:
			stop()
			<-pend
			return err
		case err := <-pend:
			stop()
			if err != nil {
				r.t.Fatalf("Retry neither returned nor slept: %v", err)
			}
			r.clock.AdvanceNext()
		}
	}
}

// gaps is the time between consecutive attempts.
func (r *retryRig) gaps() []time.Duration {
	var out []time.Duration
	for i := 1; i < len(r.calls); i++ {
		out = append(out, time.Duration(r.calls[i]-r.calls[i-1]))
	}
	return out
}

// draws is what a source seeded as WithSource's will hand out.
func draws(seed uint64, n int) []float64 {
	rng := rand.New(rand.NewPCG(seed, seed))
	out := make([]float64, n)
	for i := range out {
		out[i] = rng.Float64()
	}
	return out
}

var errDown = errors.New("backend down")

// TestRetrySchedule: with a seeded source, the sleeps between attempts are
// exactly the backoff's Schedule of the same draws, for every jitter.
func TestRetrySchedule(t *testing.T) {
	for _, jitter := range []policy.Jitter{policy.Rigid, policy.Full, policy.Equal, policy.Decorrelated} {
		t.Run(jitter.String(), func(t *testing.T) {
			r := newRetryRig(t)
			b := policy.Backoff{Base: 100 * time.Millisecond, Factor: 2, Cap: 2 * time.Second, Attempts: 8, Jitter: jitter}
			const seed = 42
			want := b.Schedule(draws(seed, b.Attempts))
			err := r.run(context.Background(), b, func(int) error { return errDown },
				client.WithSource(rand.New(rand.NewPCG(seed, seed))))
			got := r.gaps()
			if len(got) != len(want) {
				t.Fatalf("%d sleeps, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("step %d: slept %v, want %v (schedule %v)", i, got[i], want[i], want)
				}
			}
			var re *client.RetryError
			if !errors.As(err, &re) || re.Attempts != b.Attempts || !errors.Is(err, errDown) || re.Cause != nil {
				t.Fatalf("Retry = %v, want a *RetryError of %d attempts wrapping errDown", err, b.Attempts)
			}
		})
	}
}

// TestRetryExhausted: the error wraps the last failure, not an earlier
// one, and says how many attempts were made.
func TestRetryExhausted(t *testing.T) {
	r := newRetryRig(t)
	fails := map[int]error{}
	err := r.run(context.Background(), policy.DefaultBackoff, func(n int) error {
		fails[n] = fmt.Errorf("attempt %d: %w", n, errDown)
		return fails[n]
	})
	if len(r.calls) != 3 {
		t.Fatalf("fn ran %d times, want DefaultBackoff's 3", len(r.calls))
	}
	if !errors.Is(err, fails[3]) || errors.Is(err, fails[1]) || !errors.Is(err, errDown) {
		t.Fatalf("Retry = %v, want it to wrap the third failure only", err)
	}
	if !strings.Contains(err.Error(), "3 attempts") || !strings.HasPrefix(err.Error(), "moonpool: ") {
		t.Fatalf("error text %q does not say the attempts", err)
	}
	// Success on a later attempt is nil.
	if err := r.run(context.Background(), policy.DefaultBackoff, func(n int) error {
		if n < 3 {
			return errDown
		}
		return nil
	}); err != nil || len(r.calls) != 3 {
		t.Fatalf("Retry succeeding on the third = %v after %d runs", err, len(r.calls))
	}
}

// TestRetryPermanent: a permanent error stops Retry at once, with no sleep.
func TestRetryPermanent(t *testing.T) {
	r := newRetryRig(t)
	errBad := errors.New("bad request")
	b := policy.Backoff{Base: time.Second, Factor: 2, Attempts: 10, Jitter: policy.Rigid}
	err := r.run(context.Background(), b, func(n int) error {
		if n == 2 {
			return client.Permanent(errBad)
		}
		return errDown
	})
	if err != errBad {
		t.Fatalf("Retry = %v, want errBad itself, unmarked", err)
	}
	if len(r.calls) != 2 || r.clock.Now()-r.t0 != int64(time.Second) {
		t.Fatalf("%d runs over %v, want 2 runs and one 1s sleep", len(r.calls), time.Duration(r.clock.Now()-r.t0))
	}
	// Marked deeper in the chain: returned as it is, still stopping.
	err = r.run(context.Background(), b, func(int) error {
		return fmt.Errorf("query: %w", client.Permanent(errBad))
	})
	if len(r.calls) != 1 || !errors.Is(err, errBad) || !strings.HasPrefix(err.Error(), "query: ") {
		t.Fatalf("wrapped Permanent: Retry = %v after %d runs", err, len(r.calls))
	}
	if client.Permanent(nil) != nil || client.RetryAfter(nil, time.Second) != nil {
		t.Fatal("marking nil made an error")
	}
}

// TestRetryAfterHint: a server's hint replaces the computed delay; the
// sleep is never shorter than the hint, is hint + draw × max(ceiling,
// hint/10) exactly, and differs from client to client.
func TestRetryAfterHint(t *testing.T) {
	r := newRetryRig(t)
	const hint = 5 * time.Second
	b := policy.Backoff{Base: 100 * time.Millisecond, Factor: 2, Cap: time.Second, Attempts: 4, Jitter: policy.Full}
	const seed = 9
	d := draws(seed, 3)
	err := r.run(context.Background(), b, func(int) error { return client.RetryAfter(errDown, hint) },
		client.WithSource(rand.New(rand.NewPCG(seed, seed))))
	if !errors.Is(err, errDown) {
		t.Fatalf("Retry = %v", err)
	}
	for i, got := range r.gaps() {
		span := max(b.Ceiling(i+1), hint/10)
		want := hint + time.Duration(d[i]*float64(span))
		if got != want || got < hint {
			t.Fatalf("step %d: slept %v, want %v (hint %v spread over %v)", i, got, want, hint, span)
		}
	}

	// A crowd told the same hint comes back spread, never early.
	const clients = 300
	seen := map[time.Duration]bool{}
	var lo, hi time.Duration = policy.Never, 0
	for c := range clients {
		r.run(context.Background(), b, func(n int) error {
			if n == 1 {
				return fmt.Errorf("503: %w", client.RetryAfter(errDown, hint))
			}
			return nil
		}, client.WithSource(rand.New(rand.NewPCG(uint64(c), 1))))
		g := r.gaps()[0]
		seen[g] = true
		lo, hi = min(lo, g), max(hi, g)
	}
	if lo < hint || hi > hint+hint/10 {
		t.Fatalf("crowd came back over [%v, %v], want within [%v, %v]", lo, hi, hint, hint+hint/10)
	}
	if len(seen) < clients*9/10 || hi-lo < hint/20 {
		t.Fatalf("crowd came back at %d distinct instants over %v: not spread", len(seen), hi-lo)
	}
}

// hintError is a caller's own error type with a hint; Retry honours it
// without RetryAfter.
type hintError struct{ after time.Duration }

func (e hintError) Error() string             { return "throttled" }
func (e hintError) RetryAfter() time.Duration { return e.after }

func TestRetryAfterOwnType(t *testing.T) {
	r := newRetryRig(t)
	b := policy.Backoff{Base: time.Millisecond, Attempts: 2, Jitter: policy.Rigid}
	r.run(context.Background(), b, func(int) error { return hintError{after: time.Minute} })
	if g := r.gaps(); len(g) != 1 || g[0] < time.Minute || g[0] > time.Minute+time.Minute/10 {
		t.Fatalf("slept %v, want a minute spread by at most a tenth", g)
	}
}

// TestRetryCancelDuringSleep: ctx ending while Retry sleeps returns at
// once, wrapping both ctx's error and the last failure, leaving no timer.
func TestRetryCancelDuringSleep(t *testing.T) {
	clock := vclock.NewVirtual()
	eng := engine.New(engine.WithClock(clock))
	defer eng.Shutdown(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan error, 1)
	runs := 0
	go func() {
		out <- client.Retry(ctx, policy.Backoff{Base: time.Hour, Attempts: 5, Jitter: policy.Rigid},
			func(context.Context) error { runs++; return errDown }, client.SleepOn(eng.Clock()))
	}()
	net, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	if err := clock.WaitPending(net, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	err := <-out
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errDown) {
		t.Fatalf("Retry = %v, want context.Canceled and errDown", err)
	}
	var re *client.RetryError
	if !errors.As(err, &re) || re.Attempts != 1 || runs != 1 {
		t.Fatalf("Retry = %v after %d runs, want 1 attempt", err, runs)
	}
	if clock.Pending() != 0 || clock.Now() != vclock.Epoch {
		t.Fatalf("left %d timers; clock moved %v", clock.Pending(), time.Duration(clock.Now()-vclock.Epoch))
	}
	// A ctx done before the first attempt runs nothing.
	runs = 0
	err = client.Retry(ctx, policy.DefaultBackoff, func(context.Context) error { runs++; return nil }, client.SleepOn(eng.Clock()))
	if !errors.Is(err, context.Canceled) || runs != 0 {
		t.Fatalf("Retry on a done ctx = %v after %d runs", err, runs)
	}
}

// TestRetryDeadline: a sleep that would end after ctx's deadline is not
// slept: Retry returns at once, and the clock does not move.
func TestRetryDeadline(t *testing.T) {
	r := newRetryRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := r.run(ctx, policy.Backoff{Base: time.Hour, Attempts: 3, Jitter: policy.Rigid}, func(int) error { return errDown })
	var we *client.WaitError
	if !errors.Is(err, client.ErrExceedsDeadline) || !errors.As(err, &we) || we.Wait != time.Hour || !errors.Is(err, errDown) {
		t.Fatalf("Retry = %v, want ErrExceedsDeadline for a 1h sleep, wrapping errDown", err)
	}
	if len(r.calls) != 1 || r.clock.Now() != r.t0 {
		t.Fatalf("%d runs, clock moved %v", len(r.calls), time.Duration(r.clock.Now()-r.t0))
	}
}

// TestRetryBadInput: each odd argument has its documented answer.
func TestRetryBadInput(t *testing.T) {
	r := newRetryRig(t)
	ran := false
	fn := func(context.Context) error { ran = true; return nil }
	if err := client.Retry(context.Background(), policy.Backoff{}, fn); !errors.Is(err, client.ErrNoAttempts) || ran {
		t.Fatalf("zero Backoff: %v (ran %v), want ErrNoAttempts without running", err, ran)
	}
	if err := client.Retry(context.Background(), policy.DefaultBackoff, nil); err == nil {
		t.Fatal("nil fn accepted")
	}
	if err := client.Retry(context.Background(), policy.DefaultBackoff, fn, client.RetryOption{}, client.WithSource(nil), client.SleepOn(nil), client.WithBudget(nil)); err != nil || !ran {
		t.Fatalf("zero and nil options: %v", err)
	}
	// A negative hint is read as none: spread over the ceiling from zero.
	err := r.run(context.Background(), policy.Backoff{Base: time.Second, Attempts: 2, Jitter: policy.Rigid},
		func(int) error { return client.RetryAfter(errDown, -time.Hour) })
	if g := r.gaps(); !errors.Is(err, errDown) || len(g) != 1 || g[0] < 0 || g[0] > time.Second {
		t.Fatalf("negative hint: slept %v", g)
	}
}

// TestRetryNilContext: a nil ctx is an error, not a panic.
func TestRetryNilContext(t *testing.T) {
	//lint:ignore SA1012 a nil ctx is the point
	if err := client.Retry(nil, policy.DefaultBackoff, func(context.Context) error { return nil }); err == nil { //nolint:staticcheck
		t.Fatal("Retry(nil, ...): no error")
	}
}
