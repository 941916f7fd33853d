package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
)

// wallClock is a virtual clock whose readings are Unix nanoseconds on a
// wall of its own, and which reads a deadline on that wall.
type wallClock struct{ *vclock.Virtual }

func (c wallClock) Until(t time.Time) time.Duration { return time.Duration(t.UnixNano() - c.Now()) }

// at is the instant d from now on c's wall.
func (c wallClock) at(d time.Duration) time.Time { return time.Unix(0, c.Now()+int64(d)) }

// wallCtx carries a deadline on a wallClock's wall. It ends only with its
// parent, ten seconds on the machine's clock after wallEngine, so that a
// test that hangs fails.
type wallCtx struct {
	context.Context
	deadline time.Time
}

func (c wallCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// wallEngine is an engine on a wallClock of its own, and a maker of
// contexts whose deadlines are d from now on that clock.
func wallEngine(t *testing.T) (*engine.Engine, wallClock, func(d time.Duration) context.Context) {
	clock := wallClock{vclock.NewVirtual()}
	eng := engine.New(engine.WithClock(clock))
	safety, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(func() {
		cancel()
		_ = eng.Shutdown(context.Background())
	})
	return eng, clock, func(d time.Duration) context.Context { return wallCtx{safety, clock.at(d)} }
}

// TestDeadlineReadOnTheEngineClock: a clock with an Until method says how
// far off a context's deadline is, for a limiter's Wait, an adaptive
// gate's Enter and Retry's sleeps. The clock reads 2026-01-01, long past
// on the machine: read there, every deadline below would have passed.
func TestDeadlineReadOnTheEngineClock(t *testing.T) {
	t.Run("limiter", func(t *testing.T) {
		eng, clock, in := wallEngine(t)
		b, err := client.NewBucket(eng, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close(context.Background())
		if !b.Allow() {
			t.Fatal("a full bucket refused")
		}
		var we *client.WaitError
		if err := b.Wait(in(500 * time.Millisecond)); !errors.As(err, &we) || we.Wait != time.Second {
			t.Fatalf("Wait with 500ms left = %v, want a *WaitError of 1s", err)
		}
		done := make(chan error, 1)
		go func() { done <- b.Wait(in(2 * time.Second)) }()
		if err := clock.WaitPending(in(0), 1); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		if err := <-done; err != nil {
			t.Fatalf("Wait with 2s left = %v, want the token at 1s", err)
		}
	})

	t.Run("adaptive gate", func(t *testing.T) {
		eng, clock, in := wallEngine(t)
		g := fixedGate(t, eng, 1, 0)
		learnLatency(t, g, clock.Virtual, 20, 100*time.Millisecond)
		p, err := g.Enter(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// One ahead: a latency of waiting, and a latency and a quarter to finish.
		_, err = g.Enter(in(200 * time.Millisecond))
		var we *client.WaitError
		if !errors.As(err, &we) || we.Wait != 100*time.Millisecond {
			t.Fatalf("Enter with 200ms left = %v, want a *WaitError of 100ms", err)
		}
		ch := enterAsync(g, in(time.Hour))
		queued(t, g, 1)
		p.Leave()
		e := outcome(t, ch, "Enter with an hour left")
		if e.err != nil {
			t.Fatalf("Enter with an hour left = %v, want the room given back", e.err)
		}
		e.pass.Leave()
	})

	t.Run("retry", func(t *testing.T) {
		_, clock, in := wallEngine(t)
		b := client.Backoff{Base: time.Second, Factor: 1, Cap: time.Second, Attempts: 2, Jitter: client.Rigid}
		calls := 0
		done := make(chan error, 1)
		go func() {
			done <- client.Retry(in(2*time.Second), b, func(context.Context) error {
				if calls++; calls == 1 {
					return errors.New("503 busy")
				}
				return nil
			}, client.SleepOn(clock))
		}()
		select {
		case err := <-done:
			t.Fatalf("Retry with 2s left = %v after %d calls, want it to sleep 1s first", err, calls)
		case <-waitPending(in(0), clock.Virtual):
		}
		clock.AdvanceNext()
		if err := <-done; err != nil || calls != 2 {
			t.Fatalf("Retry with 2s left = %v after %d calls, want success on the second", err, calls)
		}
	})
}

// waitPending is closed once a timer is pending on v, or ctx has ended.
func waitPending(ctx context.Context, v *vclock.Virtual) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		_ = v.WaitPending(ctx, 1)
		close(ch)
	}()
	return ch
}
