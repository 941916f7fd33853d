package moongrpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moongrpc"
	"github.com/moonpool-go/moonpool/moontest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// fixedAdaptive is an adaptive gate whose limit cannot move from limit,
// with a line of queue.
func fixedAdaptive(t *testing.T, eng *client.Engine, limit, queue int) *client.AdaptiveGate {
	t.Helper()
	g, err := client.NewAdaptiveGate(eng, client.AdaptiveConfig{Min: limit, Max: limit, Start: limit, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// inLine waits, with a deadline, until g has n calls in line.
func inLine(t *testing.T, g *client.AdaptiveGate, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for g.Stats().Queued != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d in line after 10s, want %d", g.Stats().Queued, n)
		}
		runtime.Gosched()
	}
}

// sayAs calls Say with priority as the moonpool-priority metadata ("" for
// none), and returns the trailer with the error.
func sayAs(ctx context.Context, conn *grpc.ClientConn, priority string) (metadata.MD, error) {
	if priority != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, moongrpc.PriorityKey, priority)
	}
	var trailer metadata.MD
	err := conn.Invoke(ctx, sayMethod, wrapperspb.String("hi"), new(wrapperspb.StringValue), grpc.Trailer(&trailer))
	return trailer, err
}

// outcome is one call's priority and error.
type outcome struct {
	priority string
	err      error
}

// sayAsync is sayAs on a goroutine; its outcome comes on the channel.
func sayAsync(ctx context.Context, conn *grpc.ClientConn, priority string, out chan<- outcome) {
	go func() {
		_, err := sayAs(ctx, conn, priority)
		out <- outcome{priority, err}
	}()
}

// next is the next value on ch, with a deadline.
func next[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing after 10s", what)
	}
	var zero T
	return zero
}

// A gate of one with a line of one, full with a low call: a critical call
// takes its place, the low call fails Unavailable, another low call is
// refused at once, and the critical call runs next, its priority in the
// handler's ctx.
func TestAdaptivePriorityUnderOverload(t *testing.T) {
	_, eng := virtualEngine(t)
	g := fixedAdaptive(t, eng, 1, 1)
	release, stop := make(chan struct{}), make(chan struct{})
	entered := make(chan string, 4)
	e := &echo{answer: func(ctx context.Context, _ int64) error {
		entered <- client.PriorityFrom(ctx).String()
		select {
		case <-release:
		case <-stop:
		}
		return nil
	}}
	conn := serve(t, e, moongrpc.Config{Adaptive: g}, nil)
	t.Cleanup(func() { // before the server stops: a failed test lets its calls go
		close(stop)
		g.Close(context.Background())
	})
	ctx := t.Context()

	out := make(chan outcome, 4)
	sayAsync(ctx, conn, "", out)
	if p := next(t, entered, "first call"); p != "normal" {
		t.Fatalf("a call without metadata ran as %q, want normal", p)
	}
	sayAsync(ctx, conn, "low", out)
	inLine(t, g, 1)
	sayAsync(ctx, conn, "critical", out)
	if o := next(t, out, "the low call in line"); o.priority != "low" || status.Code(o.err) != codes.Unavailable {
		t.Fatalf("%s: %v, want the low call refused Unavailable", o.priority, o.err)
	}
	inLine(t, g, 1)
	if _, err := sayAs(ctx, conn, "low"); status.Code(err) != codes.Unavailable {
		t.Fatalf("a low call at a line full of a critical one: %v, want Unavailable", err)
	}
	release <- struct{}{}
	if p := next(t, entered, "the waiter"); p != "critical" {
		t.Fatalf("%s ran next, want critical", p)
	}
	release <- struct{}{}
	for range 2 {
		if o := next(t, out, "calls let in"); o.err != nil {
			t.Fatalf("%s: %v", o.priority, o.err)
		}
	}
	s := g.Stats()
	if s.InFlight != 0 || s.Queued != 0 || s.Classes[0].QueueFull != 2 || s.Classes[1].Entered != 1 || s.Classes[3].Entered != 1 {
		t.Fatalf("stats %+v, want 2 low refused for a full line, 1 normal and 1 critical let in", s)
	}
	if n := e.calls.Load(); n != 2 {
		t.Errorf("the handler ran %d times, want 2", n)
	}
}

// learn lets n calls through g, each taking rtt on clock, and moves the
// clock on until the gate has a latency.
func learn(t *testing.T, g *client.AdaptiveGate, clock *moontest.Clock, n int, rtt time.Duration) {
	t.Helper()
	for range n {
		p, err := g.Enter(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(rtt)
		p.Leave()
	}
	for range 40 {
		if g.Stats().Latency != 0 {
			return
		}
		clock.Advance(25 * time.Millisecond)
	}
	t.Fatalf("no latency learnt from %d calls of %v", n, rtt)
}

// A call whose deadline comes before its expected wait is refused at once
// with Unavailable and the wait as pushback; one cancelled in line fails
// Canceled and leaves the line. Neither reaches the handler.
func TestAdaptiveDeadlineAndCancel(t *testing.T) {
	clock, eng := virtualEngine(t)
	g := fixedAdaptive(t, eng, 1, 4)
	learn(t, g, clock, 20, 10*time.Second)
	in, err := g.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer in.Leave()
	e := &echo{}
	conn := serve(t, e, moongrpc.Config{Adaptive: g}, nil)

	short, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	trailer, err := sayAs(short, conn, "")
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a call with 5s to go and 20s ahead: %v, want Unavailable", err)
	}
	if got := trailer.Get(moongrpc.PushbackTrailer); len(got) != 1 || got[0] != "10000" {
		t.Errorf("pushback %q, want the expected wait, 10000", got)
	}
	if wait, ok := retryInfo(err); !ok || wait != 10*time.Second {
		t.Errorf("RetryInfo %v (%v), want 10s", wait, ok)
	}

	gone, cancelGone := context.WithCancel(t.Context())
	out := make(chan outcome, 1)
	sayAsync(gone, conn, "", out)
	inLine(t, g, 1)
	cancelGone()
	if o := next(t, out, "the cancelled call"); status.Code(o.err) != codes.Canceled {
		t.Fatalf("a call cancelled in line: %v, want Canceled", o.err)
	}
	inLine(t, g, 0)

	// The server's own answer, as its other interceptors and its stats
	// see it: the client has gone, so it is Canceled, not a refusal.
	unary := moongrpc.UnaryServerInterceptor(moongrpc.Config{Adaptive: g})
	gone, cancelGone = context.WithCancel(t.Context())
	failed := make(chan error, 1)
	go func() {
		_, err := unary(gone, nil, &grpc.UnaryServerInfo{FullMethod: sayMethod}, func(context.Context, any) (any, error) {
			return nil, errors.New("the handler ran")
		})
		failed <- err
	}()
	inLine(t, g, 1)
	cancelGone()
	if err := next(t, failed, "the interceptor"); status.Code(err) != codes.Canceled {
		t.Fatalf("the server interceptor answered a call cancelled in line with %v, want Canceled", err)
	}
	s := g.Stats()
	if s.Classes[1].Deadline != 1 || s.Classes[1].Cancelled != 2 {
		t.Errorf("stats %+v, want one refused for its deadline and two cancelled", s)
	}
	if n := e.calls.Load(); n != 0 {
		t.Errorf("the handler ran %d times, want 0", n)
	}
}

// seen records the priority each handler saw in its ctx, unary and
// stream, behind the server interceptors.
type seen struct {
	unary, stream chan string
}

func (s *seen) unaryInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	s.unary <- client.PriorityFrom(ctx).String()
	return h(ctx, req)
}

func (s *seen) streamInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	s.stream <- client.PriorityFrom(ss.Context()).String()
	return h(srv, ss)
}

// serveSeen starts the echo service behind cfg's interceptors and s's, and
// dials it with opts. Both stop with the test.
func serveSeen(t *testing.T, cfg moongrpc.Config, s *seen, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(moongrpc.UnaryServerInterceptor(cfg), s.unaryInterceptor),
		grpc.ChainStreamInterceptor(moongrpc.StreamServerInterceptor(cfg), s.streamInterceptor),
	)
	srv.RegisterService(&echoDesc, &echo{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	conn, err := grpc.NewClient(lis.Addr().String(), opts...)
	if err != nil {
		srv.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("serve: %v", err)
		}
	})
	return conn
}

// count opens a Count stream on ctx and reads it to its end.
func count(ctx context.Context, conn *grpc.ClientConn) error {
	cs, err := conn.NewStream(ctx, countDesc, countMethod)
	if err != nil {
		return err
	}
	if err := cs.SendMsg(wrapperspb.String("n")); err != nil {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	for {
		if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// The client interceptors send the priority of the call's ctx in the
// metadata, and the server interceptors put it in the handler's ctx, for
// unary calls and streams: through the retrying interceptor, through
// UnaryClientPriority and StreamClientPriority, and to a server whose
// Priority trusts no metadata.
func TestPriorityTravels(t *testing.T) {
	_, eng := virtualEngine(t)
	g := fixedAdaptive(t, eng, 4, 0)
	s := &seen{unary: make(chan string, 1), stream: make(chan string, 1)}
	trusting := moongrpc.Config{Adaptive: g}
	untrusting := moongrpc.Config{Adaptive: g, Priority: func(context.Context, string) client.Priority { return client.PriorityLow }}
	retrying := grpc.WithUnaryInterceptor(moongrpc.UnaryClientInterceptor(eng, client.DefaultBackoff))
	plain := grpc.WithChainUnaryInterceptor(moongrpc.UnaryClientPriority)
	streams := grpc.WithChainStreamInterceptor(moongrpc.StreamClientPriority)
	conns := map[string]*grpc.ClientConn{
		"retrying":   serveSeen(t, trusting, s, retrying),
		"plain":      serveSeen(t, trusting, s, plain, streams),
		"none":       serveSeen(t, trusting, s),
		"untrusting": serveSeen(t, untrusting, s, plain, streams),
	}
	tests := []struct {
		conn     string
		priority client.Priority
		md       string // moonpool-priority the caller sets itself, "" for none
		want     string
		stream   bool
	}{
		{"retrying", client.PriorityHigh, "", "high", false},
		{"retrying", client.PriorityLow, "critical", "low", false},
		{"retrying", client.PriorityNormal, "", "normal", false},
		{"plain", client.PriorityCritical, "", "critical", false},
		{"plain", client.PriorityCritical, "", "critical", true},
		{"plain", client.PriorityNormal, "high", "high", false},
		{"none", client.PriorityCritical, "", "normal", false},
		{"none", client.PriorityNormal, " HIGH ", "high", false},
		{"none", client.PriorityNormal, "urgent", "normal", false},
		{"untrusting", client.PriorityCritical, "", "low", false},
	}
	for i, tc := range tests {
		ctx := client.WithPriority(t.Context(), tc.priority)
		if tc.md != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, moongrpc.PriorityKey, tc.md)
		}
		conn, got := conns[tc.conn], s.unary
		var err error
		if tc.stream {
			err, got = count(ctx, conn), s.stream
		} else {
			_, err = sayAs(ctx, conn, "")
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if p := next(t, got, "the handler"); p != tc.want {
			t.Errorf("step %d: %s client, %v with metadata %q: the handler saw %s, want %s", i, tc.conn, tc.priority, tc.md, p, tc.want)
		}
	}
}

// The server interceptor in a testing/synctest bubble, on the bubble's
// clock: a critical call waits in line while a call runs for a second,
// gets in before a low one that came first, and its handler sees its
// priority.
func TestAdaptiveInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := client.NewEngine()
		defer eng.Shutdown(context.Background())
		g := fixedAdaptive(t, eng, 1, 2)
		defer g.Close(context.Background())
		unary := moongrpc.UnaryServerInterceptor(moongrpc.Config{Adaptive: g})
		start := time.Now()
		var order []string
		handler := func(ctx context.Context, _ any) (any, error) {
			order = append(order, fmt.Sprintf("%s at %v", client.PriorityFrom(ctx), time.Since(start)))
			time.Sleep(time.Second)
			return nil, nil
		}
		call := func(priority string) <-chan error {
			ch := make(chan error, 1)
			ctx := t.Context()
			if priority != "" {
				ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(moongrpc.PriorityKey, priority))
			}
			go func() {
				_, err := unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: sayMethod}, handler)
				ch <- err
			}()
			synctest.Wait()
			return ch
		}
		calls := []<-chan error{call(""), call("low"), call("critical")}
		for i, ch := range calls {
			if err := <-ch; err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		}
		want := []string{"normal at 0s", "critical at 1s", "low at 2s"}
		if !slices.Equal(order, want) {
			t.Errorf("handlers ran %q, want %q", order, want)
		}
	})
}

// MetadataPriority reads the first value of its key, named in any case,
// and a priority's name in any case; anything else is PriorityNormal.
func TestMetadataPriority(t *testing.T) {
	tests := []struct {
		name string // the key MetadataPriority is given
		md   metadata.MD
		want client.Priority
	}{
		{"", metadata.Pairs(moongrpc.PriorityKey, "critical"), client.PriorityCritical},
		{"", metadata.Pairs(moongrpc.PriorityKey, "Low"), client.PriorityLow},
		{"", metadata.Pairs(moongrpc.PriorityKey, "high", moongrpc.PriorityKey, "low"), client.PriorityHigh},
		{"", metadata.Pairs(moongrpc.PriorityKey, "2"), client.PriorityNormal},
		{"", metadata.Pairs("x-priority", "low"), client.PriorityNormal},
		{"", nil, client.PriorityNormal},
		{"X-Priority", metadata.Pairs("x-priority", "low"), client.PriorityLow},
		{"X-Priority", metadata.Pairs(moongrpc.PriorityKey, "low"), client.PriorityNormal},
	}
	for i, tc := range tests {
		ctx := context.Background()
		if tc.md != nil {
			ctx = metadata.NewIncomingContext(ctx, tc.md)
		}
		if got := moongrpc.MetadataPriority(tc.name)(ctx, sayMethod); got != tc.want {
			t.Errorf("step %d: key %q, metadata %v: %v, want %v", i, tc.name, tc.md, got, tc.want)
		}
	}
}
