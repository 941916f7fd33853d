package bubble_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
)

// TestBucket: a bucket of 10 a second lets its burst through, then a Wait
// takes exactly 100 ms of fake time per token. A Wait whose deadline is too
// near returns at once, and a cancelled Wait takes nothing.
func TestBucket(t *testing.T) {
	inBubbles(t, func(t *testing.T, eng *engine.Engine) {
		ctx := context.Background()
		b, err := client.NewBucket(eng, 10, 2)
		must(t, err)
		for i := range 2 {
			if !b.Allow() {
				t.Fatalf("a full bucket refused token %d of its burst of 2", i+1)
			}
		}
		if b.Allow() {
			t.Fatal("an empty bucket allowed")
		}
		if d := b.Try(); d.OK || d.Wait != 100*time.Millisecond || d.RetryAfter() != 1 {
			t.Fatalf("Try of an empty bucket = %+v, want a refusal for 100ms", d)
		}
		if got := took(func() {
			for range 5 {
				must(t, b.Wait(ctx))
			}
		}); got != 500*time.Millisecond {
			t.Fatalf("5 Waits at 10 a second took %v, want 500ms", got)
		}

		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		var we *client.WaitError
		if got := took(func() { err = b.Wait(short) }); got != 0 || !errors.As(err, &we) || we.Wait != 100*time.Millisecond {
			t.Fatalf("Wait with 50ms left = %v after %v, want a *WaitError of 100ms at once", err, got)
		}

		// A Wait cancelled while parked withdraws its place: the token
		// it would have had is there for the next caller.
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- b.Wait(cctx) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Wait = %v, want context.Canceled", err)
		}
		time.Sleep(100 * time.Millisecond)
		if !b.Allow() {
			t.Fatal("the token of a withdrawn Wait was not there 100ms later")
		}

		// Reserve and Cancel: the tokens go back.
		time.Sleep(time.Second)
		r := b.Reserve(2)
		if !r.OK() || b.Tokens() != 0 {
			t.Fatalf("Reserve(2) of a full bucket: ok %v, %v tokens left", r.OK(), b.Tokens())
		}
		if back := r.Cancel(); back != 2 || b.Tokens() != 2 {
			t.Fatalf("Cancel gave back %v, bucket holds %v; want 2 and 2", back, b.Tokens())
		}

		must(t, b.Close(ctx))
		if b.Allow() || !errors.Is(b.Wait(ctx), client.ErrClosed) {
			t.Fatal("a closed bucket still answers")
		}
	})
}

// TestBucketWaitersInLine: callers parked in Wait are served first come,
// first served, one a rate's step apart.
func TestBucketWaitersInLine(t *testing.T) {
	inBubbles(t, func(t *testing.T, eng *engine.Engine) {
		b, err := client.NewBucket(eng, 1, 1)
		must(t, err)
		b.Allow()
		start := time.Now()
		served := make(chan time.Duration, 3)
		for range 3 {
			go func() {
				if err := b.Wait(context.Background()); err != nil {
					t.Error(err)
				}
				served <- time.Since(start)
			}()
			synctest.Wait() // each parks before the next comes
		}
		for i := range 3 {
			if got, want := <-served, time.Duration(i+1)*time.Second; got != want {
				t.Fatalf("waiter %d served after %v, want %v", i, got, want)
			}
		}
	})
}

// TestKeyedBucket: keys are independent, and a key's Wait takes its rate's
// step of fake time.
func TestKeyedBucket(t *testing.T) {
	inBubbles(t, func(t *testing.T, eng *engine.Engine) {
		k, err := client.NewKeyedBucket(eng, 2, 1)
		must(t, err)
		if !k.Allow("a") || k.Allow("a") {
			t.Fatal("key a: want one allowed, then a refusal")
		}
		if !k.Allow("b") {
			t.Fatal("key b refused for key a's use")
		}
		if d := k.Delay("a"); d != 500*time.Millisecond {
			t.Fatalf("Delay(a) = %v, want 500ms", d)
		}
		if got := took(func() { must(t, k.Wait(context.Background(), "a")) }); got != 500*time.Millisecond {
			t.Fatalf("Wait(a) took %v, want 500ms", got)
		}
		if k.Tokens("c") != 1 {
			t.Fatalf("a key not seen yet holds %v, want its burst 1", k.Tokens("c"))
		}
		must(t, k.Close(context.Background()))
	})
}

// TestWindow: three events a minute. The fourth waits until the first
// leaves the window, exactly a minute after it.
func TestWindow(t *testing.T) {
	inBubbles(t, func(t *testing.T, eng *engine.Engine) {
		w, err := client.NewWindow(eng, 3, time.Minute)
		must(t, err)
		for i := range 3 {
			if !w.Allow() {
				t.Fatalf("event %d of 3 refused", i)
			}
		}
		if d := w.Try(); d.OK || d.RetryAfter() != 60 {
			t.Fatalf("Try of a full window = %+v, want a refusal with Retry-After 60", d)
		}
		time.Sleep(20 * time.Second)
		if w.Allow() || w.Left() != 0 {
			t.Fatal("a full window made room after 20s")
		}
		if got := took(func() { must(t, w.Wait(context.Background())) }); got != 40*time.Second {
			t.Fatalf("Wait took %v, want the 40s until the first event leaves", got)
		}
		must(t, w.Close(context.Background()))
	})
}

// TestKeyedWindow: one event per key an hour. A key's Wait passes the hour
// of fake time; another key is not held up.
func TestKeyedWindow(t *testing.T) {
	inBubbles(t, func(t *testing.T, eng *engine.Engine) {
		k, err := client.NewKeyedWindow(eng, 1, time.Hour)
		must(t, err)
		if !k.Allow("a") || k.Allow("a") || !k.Allow("b") {
			t.Fatal("want a allowed once, then refused, and b allowed")
		}
		if d := k.Delay("a"); d != time.Hour {
			t.Fatalf("Delay(a) = %v, want 1h", d)
		}
		if got := took(func() { must(t, k.Wait(context.Background(), "a")) }); got != time.Hour {
			t.Fatalf("Wait(a) took %v, want 1h", got)
		}
		if k.Left("c") != 1 {
			t.Fatalf("Left of a key not seen yet = %d, want 1", k.Left("c"))
		}
		must(t, k.Close(context.Background()))
	})
}

// TestTieredBucket: each key is held to its tier's numbers.
func TestTieredBucket(t *testing.T) {
	inBubbles(t, func(t *testing.T, eng *engine.Engine) {
		tierOf := func(key string) string {
			if strings.HasPrefix(key, "paid-") {
				return "paid"
			}
			return ""
		}
		tb, err := client.NewTieredBucket(eng, tierOf, map[string]client.Rate{
			"":     {PerSecond: 1, Burst: 1},
			"paid": {PerSecond: 10, Burst: 10},
		})
		must(t, err)
		n := 0
		for tb.Allow("paid-x") {
			n++
		}
		if n != 10 {
			t.Fatalf("a paid key was let through %d at once, want its burst 10", n)
		}
		if !tb.Allow("free") || tb.Allow("free") {
			t.Fatal("a free key: want one allowed, then a refusal")
		}
		if got := took(func() { must(t, tb.Wait(context.Background(), "paid-x")) }); got != 100*time.Millisecond {
			t.Fatalf("a paid key's Wait took %v, want 100ms", got)
		}
		if got := took(func() { must(t, tb.Wait(context.Background(), "free")) }); got != 900*time.Millisecond {
			t.Fatalf("a free key's Wait took %v, want the 900ms left of its second", got)
		}
		must(t, tb.Close(context.Background()))
	})
}

// TestHourOfWaits: two Waits an hour apart pass two hours of fake time;
// inBubbles checks that they take next to no real time.
func TestHourOfWaits(t *testing.T) {
	inBubbles(t, func(t *testing.T, eng *engine.Engine) {
		b, err := client.NewBucket(eng, 1.0/3600, 1)
		must(t, err)
		b.Allow()
		if got := took(func() {
			must(t, b.Wait(context.Background()))
			must(t, b.Wait(context.Background()))
		}); got != 2*time.Hour {
			t.Fatalf("two Waits at one an hour took %v, want 2h", got)
		}
	})
}
