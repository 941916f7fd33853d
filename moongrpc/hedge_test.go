package moongrpc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/internal/hedge/hedgetest"
	"github.com/moonpool-go/moonpool/moongrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The store service's methods, as its .proto declares them: Get has no
// side effects, Put is idempotent, Pay says nothing.
const (
	getMethod = "/moongrpc.test.Store/Get"
	putMethod = "/moongrpc.test.Store/Put"
	payMethod = "/moongrpc.test.Store/Pay"
)

// The store service's .proto, registered as protoc-gen-go would register
// it, so that NoSideEffects finds its methods' idempotency levels.
func init() {
	method := func(name string, level descriptorpb.MethodOptions_IdempotencyLevel) *descriptorpb.MethodDescriptorProto {
		return &descriptorpb.MethodDescriptorProto{
			Name:       proto.String(name),
			InputType:  proto.String(".google.protobuf.StringValue"),
			OutputType: proto.String(".google.protobuf.StringValue"),
			Options:    &descriptorpb.MethodOptions{IdempotencyLevel: level.Enum()},
		}
	}
	file, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:       proto.String("moongrpc/test/store.proto"),
		Package:    proto.String("moongrpc.test"),
		Dependency: []string{"google/protobuf/wrappers.proto"},
		Syntax:     proto.String("proto3"),
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Store"),
			Method: []*descriptorpb.MethodDescriptorProto{
				method("Get", descriptorpb.MethodOptions_NO_SIDE_EFFECTS),
				method("Put", descriptorpb.MethodOptions_IDEMPOTENT),
				method("Pay", descriptorpb.MethodOptions_IDEMPOTENCY_UNKNOWN),
			},
		}},
	}, protoregistry.GlobalFiles)
	if err == nil {
		err = protoregistry.GlobalFiles.RegisterFile(file)
	}
	if err != nil {
		panic(err)
	}
}

func TestNoSideEffects(t *testing.T) {
	for method, want := range map[string]bool{
		getMethod:                      true,
		putMethod:                      false,
		payMethod:                      false,
		sayMethod:                      false, // not in the registry
		"/moongrpc.test.Store/Nothing": false,
		"/moongrpc.test.Store":         false,
		"":                             false,
	} {
		if got := moongrpc.NoSideEffects(method); got != want {
			t.Errorf("NoSideEffects(%q) = %v, want %v", method, got, want)
		}
	}
}

// store serves the store service on a real connection. Its n-th call
// (from 1) is answered by steps[n-1] (the last again past the end). It
// reports each call's number as it comes, and again as its handler
// returns if the client went away first. Every answer carries the
// call's number in the header and trailer "n".
type store struct {
	steps   []func(ctx context.Context) error
	mu      sync.Mutex
	n       int
	arrived chan int
	gone    chan int
}

func newStore(steps ...func(ctx context.Context) error) *store {
	return &store{steps: steps, arrived: make(chan int, 16), gone: make(chan int, 16)}
}

func (s *store) handle(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	s.arrived <- n
	grpc.SetHeader(ctx, metadata.Pairs("n", strconv.Itoa(n)))
	grpc.SetTrailer(ctx, metadata.Pairs("n", strconv.Itoa(n)))
	err := s.steps[min(n, len(s.steps))-1](ctx)
	if ctx.Err() != nil {
		s.gone <- n
	}
	if err != nil {
		return nil, err
	}
	return wrapperspb.String(fmt.Sprint(in.GetValue(), " from ", n)), nil
}

func storeHandler(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.StringValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	return srv.(*store).handle(ctx, in)
}

var storeDesc = grpc.ServiceDesc{
	ServiceName: "moongrpc.test.Store",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Get", Handler: storeHandler},
		{MethodName: "Put", Handler: storeHandler},
		{MethodName: "Pay", Handler: storeHandler},
	},
}

// hang answers nothing until the client goes away.
func hang(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }

// at once answers at once.
func atOnce(context.Context) error { return nil }

// serveStore starts s on 127.0.0.1 and dials it through ci. Both are
// stopped with the test.
func serveStore(t *testing.T, s *store, ci grpc.UnaryClientInterceptor) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	srv.RegisterService(&storeDesc, s)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUnaryInterceptor(ci))
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

// answer is what a call came back with.
type answer struct {
	value           string
	header, trailer metadata.MD
	err             error
}

// numberIn is md's value of "n", or "" if it has none.
func numberIn(md metadata.MD) string {
	if vs := md.Get("n"); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

func get(ctx context.Context, conn *grpc.ClientConn, method string) answer {
	var a answer
	out := new(wrapperspb.StringValue)
	a.err = conn.Invoke(ctx, method, wrapperspb.String("hi"), out, grpc.Header(&a.header), grpc.Trailer(&a.trailer))
	a.value = out.GetValue()
	return a
}

// A Get whose first attempt goes unanswered gets a hedge after the
// Delay, and the hedge's reply, header and trailer. The server sees the
// first attempt cancelled, and no timer is left.
func TestClientHedgeWins(t *testing.T) {
	clock, eng := virtualEngine(t)
	s := newStore(hang, atOnce)
	conn := serveStore(t, s, moongrpc.NewUnaryClientInterceptor(moongrpc.ClientConfig{
		Engine: eng, Hedge: &client.Hedge{Delay: 50 * time.Millisecond},
	}))
	done := make(chan answer, 1)
	go func() { done <- get(t.Context(), conn, getMethod) }()
	within10s(t, s.arrived, "the first attempt")
	if err := clock.WaitPending(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if next, _ := clock.Next(); next != 50*time.Millisecond {
		t.Fatalf("the hedge is due in %v, want 50ms", next)
	}
	clock.AdvanceNext()
	if n := within10s(t, s.arrived, "the hedge"); n != 2 {
		t.Fatalf("call %d arrived, want the hedge, 2", n)
	}
	a := within10s(t, done, "the answer")
	if a.err != nil || a.value != "hi from 2" || numberIn(a.header) != "2" || numberIn(a.trailer) != "2" {
		t.Fatalf("%+v, want the hedge's reply, header and trailer", a)
	}
	if n := within10s(t, s.gone, "the first attempt's cancellation"); n != 1 {
		t.Fatalf("call %d was cancelled, want the first", n)
	}
	if n := clock.Pending(); n != 0 {
		t.Fatalf("%d timers left", n)
	}
}

// When the first attempt answers after the hedge went out, its reply is
// the one returned, and the server sees the hedge cancelled.
func TestClientHedgeFirstWins(t *testing.T) {
	clock, eng := virtualEngine(t)
	release := make(chan struct{})
	s := newStore(func(context.Context) error { <-release; return nil }, hang)
	conn := serveStore(t, s, moongrpc.NewUnaryClientInterceptor(moongrpc.ClientConfig{
		Engine: eng, Hedge: &client.Hedge{Delay: 50 * time.Millisecond},
	}))
	done := make(chan answer, 1)
	go func() { done <- get(t.Context(), conn, getMethod) }()
	within10s(t, s.arrived, "the first attempt")
	if err := clock.WaitPending(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	clock.AdvanceNext()
	within10s(t, s.arrived, "the hedge")
	close(release)
	if a := within10s(t, done, "the answer"); a.err != nil || a.value != "hi from 1" || numberIn(a.trailer) != "1" {
		t.Fatalf("%+v, want the first attempt's reply and trailer", a)
	}
	if n := within10s(t, s.gone, "the hedge's cancellation"); n != 2 {
		t.Fatalf("call %d was cancelled, want the hedge, 2", n)
	}
}

// lagged is a backend on a synctest bubble's clock, called as an
// interceptor's invoker. Its n-th call (from 1) is answered after lag(n)
// with fail(n), a reply "answer n" when fail is nil or says nil. A call
// cancelled first fails with its ctx's code.
type lagged struct {
	lag   func(n int) time.Duration
	fail  func(n int) error
	start time.Time

	mu    sync.Mutex
	calls []sent
}

// sent is what a lagged backend saw of one call.
type sent struct {
	at        time.Duration // since the backend was made
	method    string
	cancelled bool
}

func newLagged(lag func(n int) time.Duration) *lagged {
	return &lagged{lag: lag, start: time.Now()}
}

func (l *lagged) invoke(ctx context.Context, method string, _, reply any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
	l.mu.Lock()
	l.calls = append(l.calls, sent{at: time.Since(l.start), method: method})
	n := len(l.calls)
	l.mu.Unlock()
	timer := time.NewTimer(l.lag(n))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		l.mu.Lock()
		l.calls[n-1].cancelled = true
		l.mu.Unlock()
		return status.FromContextError(ctx.Err()).Err()
	}
	for _, o := range opts {
		if o, ok := o.(grpc.TrailerCallOption); ok {
			*o.TrailerAddr = metadata.Pairs("n", strconv.Itoa(n))
		}
	}
	if l.fail != nil {
		if err := l.fail(n); err != nil {
			return err
		}
	}
	reply.(*wrapperspb.StringValue).Value = fmt.Sprint("answer ", n)
	return nil
}

func (l *lagged) sent() []sent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]sent(nil), l.calls...)
}

// always is a lag of d for every call.
func always(d time.Duration) func(int) time.Duration {
	return func(int) time.Duration { return d }
}

// lags is a lag by call number, from 1; past the end, the last.
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

// intercept makes one call of method through ic to l, and says what came
// back and how long it took on the bubble's clock.
func intercept(ctx context.Context, ic grpc.UnaryClientInterceptor, l *lagged, method string) (answer, time.Duration) {
	start := time.Now()
	var a answer
	out := new(wrapperspb.StringValue)
	a.err = ic(ctx, method, wrapperspb.String("hi"), out, nil, l.invoke, grpc.Trailer(&a.trailer))
	a.value = out.GetValue()
	return a, time.Since(start)
}

// Of calls whose first attempt is slow, only methods Hedgeable allows
// are hedged: by default those whose .proto says they have no side
// effects. Everything else is sent once, however long it takes.
func TestClientHedgeOnlyHedgeable(t *testing.T) {
	onlyPay := func(m string) bool { return m == payMethod }
	for _, c := range []struct {
		name      string
		hedgeable func(string) bool
		method    string
		sends     int
	}{
		{"no side effects", nil, getMethod, 2},
		{"idempotent", nil, putMethod, 1},
		{"unknown", nil, payMethod, 1},
		{"not in the registry", nil, sayMethod, 1},
		{"allowed by Hedgeable", onlyPay, payMethod, 2},
		{"not allowed by Hedgeable", onlyPay, getMethod, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			inBubble(t, func(t *testing.T, eng *client.Engine) {
				l := newLagged(always(time.Second))
				ic := moongrpc.NewUnaryClientInterceptor(moongrpc.ClientConfig{
					Engine: eng, Hedge: &client.Hedge{Delay: 10 * time.Millisecond}, Hedgeable: c.hedgeable,
				})
				a, took := intercept(context.Background(), ic, l, c.method)
				if a.err != nil || a.value != "answer 1" || took != time.Second {
					t.Fatalf("%+v after %v, want the first attempt's reply at 1s", a, took)
				}
				if s := l.sent(); len(s) != c.sends {
					t.Fatalf("sent %d times, want %d", len(s), c.sends)
				}
			})
		})
	}
}

// While nothing answers, one hedge goes out each Delay until the call's
// Max is spent; Max 0 is 1. The first answer wins and every other
// attempt is cancelled.
func TestClientHedgeMax(t *testing.T) {
	for _, c := range []struct{ max, sends int }{{0, 2}, {1, 2}, {3, 4}} {
		t.Run(fmt.Sprint("Max ", c.max), func(t *testing.T) {
			inBubble(t, func(t *testing.T, eng *client.Engine) {
				l := newLagged(lags(time.Second, time.Hour))
				ic := moongrpc.NewUnaryClientInterceptor(moongrpc.ClientConfig{
					Engine: eng, Hedge: &client.Hedge{Delay: 100 * time.Millisecond, Max: c.max},
				})
				a, _ := intercept(context.Background(), ic, l, getMethod)
				if a.err != nil || a.value != "answer 1" || numberIn(a.trailer) != "1" {
					t.Fatalf("%+v, want the first attempt's reply and trailer", a)
				}
				synctest.Wait()
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

// A hedge that fails with a code worth retrying does not beat a slower
// reply. A code not worth retrying is an answer, and wins. When every
// attempt out fails, the call is retried as any failure is.
func TestClientHedgeFailureIsNoAnswer(t *testing.T) {
	inBubble(t, func(t *testing.T, eng *client.Engine) {
		ic := moongrpc.NewUnaryClientInterceptor(moongrpc.ClientConfig{
			Engine: eng, Hedge: &client.Hedge{Delay: 100 * time.Millisecond},
		})
		l := newLagged(lags(time.Second, 0))
		l.fail = func(n int) error {
			if n == 2 {
				return status.Error(codes.Unavailable, "busy")
			}
			return nil
		}
		if a, took := intercept(context.Background(), ic, l, getMethod); a.err != nil || a.value != "answer 1" || took != time.Second {
			t.Fatalf("%+v after %v, want the first attempt's reply at 1s", a, took)
		}

		l = newLagged(lags(time.Second, 0))
		l.fail = func(n int) error {
			if n == 2 {
				return status.Error(codes.NotFound, "no such key")
			}
			return nil
		}
		a, took := intercept(context.Background(), ic, l, getMethod)
		if status.Code(a.err) != codes.NotFound || took != 100*time.Millisecond || numberIn(a.trailer) != "2" {
			t.Fatalf("%+v after %v, want the hedge's NotFound at 100ms", a, took)
		}

		l = newLagged(always(300 * time.Millisecond))
		l.fail = func(n int) error {
			if n <= 2 {
				return status.Error(codes.Unavailable, "busy")
			}
			return nil
		}
		if a, _ := intercept(context.Background(), ic, l, getMethod); a.err != nil || a.value != "answer 3" {
			t.Fatalf("%+v, want the retry's reply", a)
		}
		if s := l.sent(); len(s) != 3 {
			t.Fatalf("sent %d times, want the attempt, its hedge and one retry", len(s))
		}
	})
}

// A ctx that ends during a race ends the call at once with ctx's code,
// and cancels every attempt.
func TestClientHedgeCancel(t *testing.T) {
	inBubble(t, func(t *testing.T, eng *client.Engine) {
		l := newLagged(always(time.Hour))
		ic := moongrpc.NewUnaryClientInterceptor(moongrpc.ClientConfig{
			Engine: eng, Hedge: &client.Hedge{Delay: 100 * time.Millisecond},
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		a, took := intercept(ctx, ic, l, getMethod)
		if status.Code(a.err) != codes.DeadlineExceeded || took != time.Second {
			t.Fatalf("%+v after %v, want DeadlineExceeded at 1s", a, took)
		}
		synctest.Wait()
		for i, q := range l.sent() {
			if !q.cancelled {
				t.Errorf("attempt %d not cancelled", i+1)
			}
		}
	})
}

// counts are st's counters, without what it says is left.
func counts(st client.BudgetStats) [5]int64 {
	return [5]int64{st.Firsts, st.Retries, st.Hedges, st.RefusedRetries, st.RefusedHedges}
}

// A hedge the budget refuses is not sent, and no other follows for that
// call; one it allows is.
func TestClientHedgeRefused(t *testing.T) {
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
				ic := moongrpc.NewUnaryClientInterceptor(moongrpc.ClientConfig{
					Engine: eng, Budget: b, Hedge: &client.Hedge{Delay: 100 * time.Millisecond, Max: 3},
				})
				if a, _ := intercept(context.Background(), ic, l, getMethod); a.value != "answer 1" {
					t.Fatalf("%+v, want the first attempt's reply", a)
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

// With no Delay, the first attempts' latencies the budget has seen say
// when to hedge. Until it has seen enough of them no call is hedged,
// however slow.
func TestClientHedgeDelayFromBudget(t *testing.T) {
	inBubble(t, func(t *testing.T, eng *client.Engine) {
		b, err := client.NewBudget(eng, client.BudgetConfig{})
		if err != nil {
			t.Fatal(err)
		}
		slow := 0 // the number of the call whose first attempt takes 5s
		l := newLagged(func(n int) time.Duration {
			if n == slow {
				return 5 * time.Second
			}
			return 20 * time.Millisecond
		})
		ic := moongrpc.NewUnaryClientInterceptor(moongrpc.ClientConfig{Engine: eng, Budget: b, Hedge: &client.Hedge{}})
		call := func() time.Duration {
			a, took := intercept(context.Background(), ic, l, getMethod)
			if a.err != nil {
				t.Fatal(a.err)
			}
			return took
		}
		for range 50 {
			call()
		}
		slow = 51
		if took := call(); took != 5*time.Second {
			t.Fatalf("with 50 latencies seen, a slow call took %v, want 5s unhedged", took)
		}
		for range 100 {
			call()
		}
		// The budget's actor folds the last latencies in on its own
		// goroutine; once it rests, its quote is the one a call reads.
		synctest.Wait()
		// Within a bucket's width, a sixteenth of the value.
		d, ok := b.HedgeDelay(0.95)
		if !ok || d < 20*time.Millisecond*15/16 || d > 20*time.Millisecond*17/16 {
			t.Fatalf("after 150 calls of 20ms the budget's p95 is %v, %v", d, ok)
		}
		slow = len(l.sent()) + 1
		if took := call(); took != d+20*time.Millisecond {
			t.Fatalf("a slow call took %v, want its hedge's reply at the p95 (%v) and 20ms more", took, d)
		}
		synctest.Wait()
		if s := l.sent(); len(s) != slow+1 || !s[slow-1].cancelled {
			t.Fatalf("%d sent, the slow one cancelled: %v; want its hedge sent and it cancelled", len(s), s[slow-1].cancelled)
		}
	})
}

// A retry the budget refuses is not made: the call fails at once with the
// server's status, and errors.Is finds client.ErrBudget.
func TestClientBudgetRefusesRetry(t *testing.T) {
	inBubble(t, func(t *testing.T, eng *client.Engine) {
		b, err := client.NewBudget(eng, client.BudgetConfig{Ratio: 0.1, MinPerSecond: -1})
		if err != nil {
			t.Fatal(err)
		}
		l := newLagged(always(0))
		l.fail = func(int) error { return status.Error(codes.Unavailable, "down") }
		ic := moongrpc.NewUnaryClientInterceptor(moongrpc.ClientConfig{Engine: eng, Budget: b})
		a, took := intercept(context.Background(), ic, l, getMethod)
		if st := status.Convert(a.err); st.Code() != codes.Unavailable || st.Message() != "down" {
			t.Fatalf("%v, want the server's Unavailable: down", a.err)
		}
		if !errors.Is(a.err, client.ErrBudget) || took != 0 || len(l.sent()) != 1 {
			t.Fatalf("%v after %v and %d calls, want ErrBudget at once after one", a.err, took, len(l.sent()))
		}
		if got := counts(b.Stats()); got != counts(client.BudgetStats{Firsts: 1, RefusedRetries: 1}) {
			t.Fatalf("budget %+v, want one first attempt and one refused retry", got)
		}
	})
}

// In a total outage the budget holds the attempts per call near
// 1 + Ratio, whatever Backoff.Attempts says, where without it each call
// is tried Attempts times.
func TestClientBudgetOutage(t *testing.T) {
	const calls = 300 // at 100 a second: three seconds of a 10s window
	for _, withBudget := range []bool{false, true} {
		t.Run(fmt.Sprint("budget ", withBudget), func(t *testing.T) {
			inBubble(t, func(t *testing.T, eng *client.Engine) {
				l := newLagged(always(0))
				l.fail = func(int) error { return status.Error(codes.Unavailable, "down") }
				cfg := moongrpc.ClientConfig{Engine: eng, Backoff: client.DefaultBackoff}
				cfg.Backoff.Attempts = 5
				if withBudget {
					var err error
					if cfg.Budget, err = client.NewBudget(eng, client.BudgetConfig{}); err != nil {
						t.Fatal(err)
					}
				}
				ic := moongrpc.NewUnaryClientInterceptor(cfg)
				start := time.Now()
				var wg sync.WaitGroup
				for range calls {
					wg.Go(func() {
						if a, _ := intercept(context.Background(), ic, l, getMethod); status.Code(a.err) != codes.Unavailable {
							t.Errorf("%v, want Unavailable", a.err)
						}
					})
					time.Sleep(10 * time.Millisecond)
				}
				wg.Wait()
				took := time.Since(start)
				perCall := float64(len(l.sent())) / calls
				if !withBudget {
					if perCall != 5 {
						t.Fatalf("%.2f attempts per call, want all 5", perCall)
					}
					return
				}
				// All in one window: retries ≤ max(Ratio × firsts, MinPerSecond × Window).
				if took >= 10*time.Second {
					t.Fatalf("took %v, past one window", took)
				}
				if limit := 1 + max(0.1*calls, 10)/calls; perCall > limit {
					t.Fatalf("%.3f attempts per call, want at most %.3f", perCall, limit)
				}
				st := cfg.Budget.Stats()
				if st.Firsts != calls || st.Retries+calls != int64(len(l.sent())) || st.RefusedRetries == 0 {
					t.Fatalf("budget %+v after %d attempts", st, len(l.sent()))
				}
			})
		})
	}
}

// With no Budget and no Hedge the interceptor allocates what it always
// has: client.Retry's own, the trailer it reads pushback from, and the
// call's options with it. A Budget, and a Hedge whose delay is not known
// yet, add nothing to that.
func TestClientOffAllocates(t *testing.T) {
	_, eng := virtualEngine(t)
	ok := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	in, out := wrapperspb.String("hi"), new(wrapperspb.StringValue)
	ctx := context.Background()
	sleep := client.SleepOn(eng.Clock())
	retry := testing.AllocsPerRun(1000, func() {
		client.Retry(ctx, client.DefaultBackoff, func(context.Context) error { return nil }, sleep)
	})
	off := moongrpc.UnaryClientInterceptor(eng, client.DefaultBackoff)
	if n := testing.AllocsPerRun(1000, func() { off(ctx, getMethod, in, out, nil, ok) }); n > retry+2 {
		t.Fatalf("%v allocations a call, want no more than client.Retry's %v and 2", n, retry)
	}
	b, err := client.NewBudget(eng, client.BudgetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	on := moongrpc.NewUnaryClientInterceptor(moongrpc.ClientConfig{Engine: eng, Budget: b, Hedge: &client.Hedge{}})
	if n := testing.AllocsPerRun(1000, func() { on(ctx, getMethod, in, out, nil, ok) }); n > retry+2 {
		t.Fatalf("with a budget, %v allocations a call, want no more than client.Retry's %v and 2", n, retry)
	}
}

// A hedge that answers with a code not worth retrying, after the attempt
// it raced failed with one worth retrying, is what the caller gets.
func TestClientHedgeAnswerAfterFailure(t *testing.T) {
	inBubble(t, func(t *testing.T, eng *client.Engine) {
		ic := moongrpc.NewUnaryClientInterceptor(moongrpc.ClientConfig{
			Engine: eng, Hedge: &client.Hedge{Delay: 100 * time.Millisecond},
		})
		// The attempt fails at 200ms. Its hedge, sent at 100ms, answers
		// at 400ms.
		l := newLagged(lags(200*time.Millisecond, 300*time.Millisecond))
		l.fail = func(n int) error {
			if n == 1 {
				return status.Error(codes.Unavailable, "busy")
			}
			return status.Error(codes.NotFound, "no such key")
		}
		a, took := intercept(context.Background(), ic, l, getMethod)
		if status.Code(a.err) != codes.NotFound || took != 400*time.Millisecond || numberIn(a.trailer) != "2" {
			t.Fatalf("%+v after %v, want the hedge's NotFound at 400ms", a, took)
		}
		if s := l.sent(); len(s) != 2 {
			t.Fatalf("sent %d times, want the attempt and its hedge", len(s))
		}
	})
}

// TestClientHedgeLead: the hedges of a fixed Delay are set early by how
// late the timers ring, those past a quantile are not (see
// hedgetest.Lead).
func TestClientHedgeLead(t *testing.T) {
	hedgetest.Lead(t, func(t *testing.T, eng *client.Engine, b *client.Budget, h *client.Hedge, k *hedgetest.Backend) func() {
		invoker := func(ctx context.Context, _ string, _, reply any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
			if err := k.Attempt(ctx); err != nil {
				return status.FromContextError(err).Err()
			}
			reply.(*wrapperspb.StringValue).Value = "ok"
			return nil
		}
		ic := moongrpc.NewUnaryClientInterceptor(moongrpc.ClientConfig{Engine: eng, Budget: b, Hedge: h})
		return func() {
			if err := ic(context.Background(), getMethod, wrapperspb.String("hi"), new(wrapperspb.StringValue), nil, invoker); err != nil {
				t.Error(err)
			}
		}
	})
}
