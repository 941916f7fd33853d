package moongrpc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moongrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Told to come back in a second, the client sleeps at least that long on
// its engine's clock, at most the hint plus its spread, and then gets
// through. Server and client keep time apart, as they would on two
// machines.
func TestClientWaitsOutThePushback(t *testing.T) {
	serverClock, serverEng := virtualEngine(t)
	clientClock, clientEng := virtualEngine(t)
	quota, err := client.NewKeyedBucket(serverEng, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{}
	backoff := client.DefaultBackoff
	conn := serve(t, e, moongrpc.Config{Quota: quota}, moongrpc.UnaryClientInterceptor(clientEng, backoff))
	if _, err := say(t.Context(), conn, ""); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := say(t.Context(), conn, ""); done <- err }()
	if err := clientClock.WaitPending(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	sleep, _ := clientClock.Next()
	spread := max(backoff.Ceiling(1), time.Second/10)
	if sleep < time.Second || sleep > time.Second+spread {
		t.Errorf("slept %v, want from 1s to %v", sleep, time.Second+spread)
	}
	serverClock.Advance(sleep)
	clientClock.AdvanceNext()
	if err := <-done; err != nil {
		t.Fatalf("after the pushback: %v", err)
	}
	if n := e.calls.Load(); n != 2 {
		t.Errorf("the handler ran %d times, want 2", n)
	}
}

// Retries stop at once for a code not allowed, for a pushback that says
// not to retry; the error is the server's, as it sent it.
func TestClientRetriesOnlyWhatItMay(t *testing.T) {
	clock, eng := virtualEngine(t)
	defer clock.FastForward()() // a wrong retry shows as a count, not a hang
	for _, c := range []struct {
		name    string
		answer  error
		trailer string // a pushback the server sets, if not ""
		retryOn []codes.Code
		code    codes.Code
	}{
		{"not allowed by default", status.Error(codes.Internal, "bug"), "", nil, codes.Internal},
		{"deadline of the server's own", status.Error(codes.DeadlineExceeded, "slow"), "", nil, codes.DeadlineExceeded},
		{"not among those given", status.Error(codes.ResourceExhausted, "quota"), "", []codes.Code{codes.Unavailable}, codes.ResourceExhausted},
		{"pushback says no", status.Error(codes.Unavailable, "going away"), "-1", nil, codes.Unavailable},
		{"pushback unreadable", status.Error(codes.Unavailable, "going away"), "later", nil, codes.Unavailable},
		{"a plain error is Unknown", errors.New("boom"), "", nil, codes.Unknown},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &echo{answer: func(ctx context.Context, _ int64) error {
				if c.trailer != "" {
					grpc.SetTrailer(ctx, metadata.Pairs(moongrpc.PushbackTrailer, c.trailer))
				}
				return c.answer
			}}
			conn := serve(t, e, moongrpc.Config{}, moongrpc.UnaryClientInterceptor(eng, client.DefaultBackoff, c.retryOn...))
			_, err := say(t.Context(), conn, "")
			if status.Code(err) != c.code {
				t.Errorf("%v, want %v", err, c.code)
			}
			if n := e.calls.Load(); n != 1 {
				t.Errorf("the server was called %d times, want 1", n)
			}
		})
	}
}

// Codes the caller allows are retried until the backoff's attempts run
// out, and the last failure comes back as the server sent it.
func TestClientGivesUpAfterItsAttempts(t *testing.T) {
	clock, eng := virtualEngine(t)
	defer clock.FastForward()()
	e := &echo{answer: func(context.Context, int64) error { return status.Error(codes.Aborted, "conflict") }}
	backoff := client.DefaultBackoff
	backoff.Attempts = 4
	conn := serve(t, e, moongrpc.Config{}, moongrpc.UnaryClientInterceptor(eng, backoff, codes.Aborted))
	_, err := say(t.Context(), conn, "")
	if st := status.Convert(err); st.Code() != codes.Aborted || st.Message() != "conflict" {
		t.Errorf("%v, want the server's Aborted: conflict", err)
	}
	if n := e.calls.Load(); n != 4 {
		t.Errorf("the server was called %d times, want 4", n)
	}
}

// A pushback that would outlast the call's deadline is not slept on: the
// refusal comes back at once, with no timer left behind.
func TestClientNeverSleepsPastTheDeadline(t *testing.T) {
	_, serverEng := virtualEngine(t)
	clientClock, clientEng := virtualEngine(t)
	quota, err := client.NewKeyedWindow(serverEng, 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{}
	conn := serve(t, e, moongrpc.Config{Quota: quota}, moongrpc.UnaryClientInterceptor(clientEng, client.DefaultBackoff))
	if _, err := say(t.Context(), conn, ""); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err = say(ctx, conn, "")
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("%v, want the server's ResourceExhausted", err)
	}
	if wait, _ := retryInfo(err); wait != time.Hour {
		t.Errorf("the error carries RetryInfo %v, want the server's 1h", wait)
	}
	if n := clientClock.Pending(); n != 0 {
		t.Errorf("%d timers pending", n)
	}
	if n := e.calls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
}

// A ctx that ends while the client sleeps ends the sleep at once, with
// ctx's code and no timer left.
func TestClientStopsWhenCtxEnds(t *testing.T) {
	clock, eng := virtualEngine(t)
	e := &echo{answer: func(context.Context, int64) error { return status.Error(codes.Unavailable, "down") }}
	conn := serve(t, e, moongrpc.Config{}, moongrpc.UnaryClientInterceptor(eng, client.DefaultBackoff))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := say(ctx, conn, ""); done <- err }()
	if err := clock.WaitPending(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Errorf("%v, want Canceled", err)
	}
	if n := clock.Pending(); n != 0 {
		t.Errorf("%d timers pending", n)
	}
	if n := e.calls.Load(); n != 1 {
		t.Errorf("the server was called %d times, want 1", n)
	}
}

// A backoff that allows no attempt, or no engine, fails every call before
// anything is sent.
func TestClientMisconfigured(t *testing.T) {
	_, eng := virtualEngine(t)
	for _, c := range []struct {
		name    string
		interc  grpc.UnaryClientInterceptor
		wantErr error
	}{
		{"zero backoff", moongrpc.UnaryClientInterceptor(eng, client.Backoff{}), client.ErrNoAttempts},
		{"nil engine", moongrpc.UnaryClientInterceptor(nil, client.DefaultBackoff), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &echo{}
			conn := serve(t, e, moongrpc.Config{}, c.interc)
			_, err := say(t.Context(), conn, "")
			if err == nil || c.wantErr != nil && !errors.Is(err, c.wantErr) {
				t.Errorf("%v, want %v", err, c.wantErr)
			}
			if n := e.calls.Load(); n != 0 {
				t.Errorf("the server was called %d times, want 0", n)
			}
		})
	}
}
