package moongrpc

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/internal/hedge"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// errNoEngine fails every call of an interceptor built without an engine,
// before anything is sent.
var errNoEngine = errors.New("moongrpc: UnaryClientInterceptor: nil engine")

// UnaryClientInterceptor retries a unary call that failed with one of
// retryOn (codes.Unavailable and codes.ResourceExhausted when none is
// given) through client.Retry: at most backoff.Attempts tries in all,
// sleeping on eng's clock between them. Other codes, and errors that are
// not gRPC statuses, are returned at once.
//
// A server's pushback is honoured: the grpc-retry-pushback-ms trailer and
// a google.rpc.RetryInfo detail (the longer of the two) replace the
// backoff's delay, spread by jitter but never shorter (see client.Retry),
// and a pushback that says not to retry (negative, not a number, given
// twice, as gRPC's own retry reads it) ends the retries with that
// failure.
//
// It blocks while it sleeps, never past the call's ctx: a sleep that
// would end after ctx's deadline is not begun, and the last failure is
// returned instead. The error is always the last attempt's, as the server
// sent it, so status.Code reads the server's code; only when ctx ends
// during a sleep is it ctx's, as codes.Canceled or
// codes.DeadlineExceeded. A backoff that allows no attempt (the zero
// Backoff; start from client.DefaultBackoff) or a nil eng fails every
// call at once with client.Retry's error, before anything is sent.
//
// Each attempt is a whole call, with its own trailer; use it instead of
// a retry policy in the channel's service config, not with one, or each
// of its attempts is retried again underneath. Install it only for
// methods that are safe to run twice: an Unavailable can also mean a
// connection lost after the server acted.
//
// Each attempt carries the priority of ctx under PriorityKey, as
// UnaryClientPriority sends it.
//
// NewUnaryClientInterceptor does the same under a retry budget, and can
// hedge slow calls.
func UnaryClientInterceptor(eng *client.Engine, backoff client.Backoff, retryOn ...codes.Code) grpc.UnaryClientInterceptor {
	return interceptor(ClientConfig{Engine: eng, Backoff: backoff, RetryOn: retryOn})
}

// ClientConfig says what NewUnaryClientInterceptor does. Only Engine is
// required.
type ClientConfig struct {
	// Engine is the clock the sleeps and hedge delays are timed on.
	// Without it, every call fails before anything is sent.
	Engine *client.Engine
	// Backoff says how many attempts, the first included, and how long
	// to wait between them when the server sends no pushback. Attempts
	// of 0 or less, as in the zero Backoff, is client.DefaultBackoff.
	Backoff client.Backoff
	// RetryOn are the codes worth another attempt. Empty is
	// codes.Unavailable and codes.ResourceExhausted.
	RetryOn []codes.Code
	// Budget, when set, holds retries and hedges to a share of first
	// attempts (see client.Budget). Each call counts as one first
	// attempt. A retry the budget refuses is not made: the call fails at
	// once with the last failure. Its status is the server's, and
	// errors.Is matches it to client.ErrBudget. The latency of each
	// call's first attempt is counted too, for Hedge. Share one Budget
	// among all the clients of a backend.
	Budget *client.Budget
	// Hedge, when set, sends a copy of a slow call to race the first
	// (see client.Hedge). Nil sends none. Only methods Hedgeable allows
	// are hedged, and only calls whose reply is a protobuf message. An
	// answer is a reply, or a code the interceptor would not retry. The
	// caller's reply, header, trailer and peer are the winner's. The
	// last hedge goes out on the caller's goroutine, and an answer of
	// another attempt cancels its ctx, which gRPC honours.
	Hedge *client.Hedge
	// Hedgeable says which methods may be hedged, by full name
	// ("/pkg.Service/Method"). Nil hedges the methods whose .proto says
	// they have no side effects (see NoSideEffects).
	Hedgeable func(method string) bool
}

// NewUnaryClientInterceptor retries unary calls as UnaryClientInterceptor
// does, with cfg's engine, backoff and codes. With cfg.Budget it retries
// only within the budget. With cfg.Hedge it races a slow call of a
// hedgeable method with copies of itself (see Hedge).
func NewUnaryClientInterceptor(cfg ClientConfig) grpc.UnaryClientInterceptor {
	if cfg.Backoff.Attempts <= 0 {
		cfg.Backoff = client.DefaultBackoff
	}
	if cfg.Hedgeable == nil {
		cfg.Hedgeable = NoSideEffects
	}
	return interceptor(cfg)
}

// interceptor is the client interceptor cfg describes, cfg read as is.
func interceptor(cfg ClientConfig) grpc.UnaryClientInterceptor {
	if len(cfg.RetryOn) == 0 {
		cfg.RetryOn = []codes.Code{codes.Unavailable, codes.ResourceExhausted}
	}
	cfg.RetryOn = slices.Clone(cfg.RetryOn)
	// The options are made once, not per call. A nil Budget's is the
	// zero option, which changes nothing.
	var sleep client.RetryOption
	if cfg.Engine != nil {
		sleep = client.SleepOn(cfg.Engine.Clock())
	}
	spend := client.WithBudget(cfg.Budget)
	lead := new(hedge.Lead) // shared by the calls' races
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if cfg.Engine == nil {
			return errNoEngine
		}
		ctx = outgoingPriority(ctx)
		c := call{cfg: &cfg, lead: lead, method: method, req: req, reply: reply, cc: cc, invoker: invoker, opts: opts}
		if cfg.Hedge != nil && cfg.Hedgeable != nil && cfg.Hedgeable(method) {
			if _, ok := reply.(proto.Message); ok {
				c.hedge = cfg.Hedge
			}
		}
		err := client.Retry(ctx, cfg.Backoff, c.attempt, sleep, spend)
		if err == nil || c.last == nil {
			return err
		}
		var re *client.RetryError
		switch {
		case ctx.Err() != nil && errors.As(err, &re) && errors.Is(re.Cause, ctx.Err()):
			return status.FromContextError(ctx.Err()).Err()
		case errors.As(err, &re) && errors.Is(re.Cause, client.ErrBudget):
			return &budgetError{err: c.last}
		}
		return c.last
	}
}

// call is one intercepted call's state across its attempts.
type call struct {
	cfg     *ClientConfig
	method  string
	req     any
	reply   any
	cc      *grpc.ClientConn
	invoker grpc.UnaryInvoker
	opts    []grpc.CallOption
	made    bool          // the first attempt has gone out
	last    error         // the latest failure, as the server sent it
	hedge   *client.Hedge // cfg.Hedge if the call may be hedged, else nil
	hedges  int           // hedges sent so far
	lead    *hedge.Lead   // how early the alarms for hedges are set
}

// attempt makes the call once, and says by its error whether Retry should
// try again. With a hedge due it races copies of the call instead.
func (c *call) attempt(ctx context.Context) error {
	if delay, lead, ok := c.hedgeDelay(); ok {
		return c.race(ctx, delay, lead)
	}
	first := !c.made
	c.made = true
	var start int64
	if first && c.cfg.Budget != nil {
		start = c.cfg.Engine.Clock().Now()
	}
	var trailer metadata.MD
	// A fresh slice each time: appending to opts itself could write
	// into the caller's backing array.
	err := c.invoker(ctx, c.method, c.req, c.reply, c.cc, append(slices.Clip(c.opts), grpc.Trailer(&trailer))...)
	judged, answer := c.judge(err, trailer)
	if first && answer && c.cfg.Budget != nil {
		c.cfg.Budget.Observe(time.Duration(c.cfg.Engine.Clock().Now() - start))
	}
	if err != nil {
		c.last = err
	}
	return judged
}

// judge reads an attempt's outcome as attempt returns it: nil for a
// reply, Permanent for what another attempt cannot change, a hint for
// pushback, the error itself otherwise. answer says whether the server
// answered: a reply, or a code another attempt would not change.
func (c *call) judge(err error, trailer metadata.MD) (judged error, answer bool) {
	if err == nil {
		return nil, true
	}
	st, ok := status.FromError(err)
	if !ok || !slices.Contains(c.cfg.RetryOn, st.Code()) {
		return client.Permanent(err), true
	}
	wait, again := hint(st, trailer)
	switch {
	case !again:
		return client.Permanent(err), false
	case wait > 0:
		return client.RetryAfter(err, wait), false
	}
	return err, false
}

// budgetError is the last failure of a call whose retry the budget
// refused. Its status is the server's, and errors.Is also finds
// client.ErrBudget.
type budgetError struct{ err error }

func (e *budgetError) Error() string {
	return e.err.Error() + " (" + client.ErrBudget.Error() + ")"
}

func (e *budgetError) Unwrap() []error { return []error{e.err, client.ErrBudget} }

// GRPCStatus is the server's status, which is how status.Code and
// status.FromError read it.
func (e *budgetError) GRPCStatus() *status.Status { return status.Convert(e.err) }
