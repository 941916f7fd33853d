package moongrpc

import (
	"context"
	"errors"
	"slices"

	"github.com/moonpool-go/moonpool/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
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
func UnaryClientInterceptor(eng *client.Engine, backoff client.Backoff, retryOn ...codes.Code) grpc.UnaryClientInterceptor {
	if len(retryOn) == 0 {
		retryOn = []codes.Code{codes.Unavailable, codes.ResourceExhausted}
	}
	retryOn = slices.Clone(retryOn)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if eng == nil {
			return errNoEngine
		}
		var last error
		err := client.Retry(ctx, backoff, func(ctx context.Context) error {
			var trailer metadata.MD
			// A fresh slice each time: appending to opts itself could
			// write into the caller's backing array.
			err := invoker(ctx, method, req, reply, cc, append(slices.Clip(opts), grpc.Trailer(&trailer))...)
			if err == nil {
				return nil
			}
			last = err
			st, ok := status.FromError(err)
			if !ok || !slices.Contains(retryOn, st.Code()) {
				return client.Permanent(err)
			}
			wait, again := hint(st, trailer)
			switch {
			case !again:
				return client.Permanent(err)
			case wait > 0:
				return client.RetryAfter(err, wait)
			}
			return err
		}, client.SleepOn(eng.Clock()))
		var re *client.RetryError
		switch {
		case err == nil || last == nil:
			return err
		case ctx.Err() != nil && errors.As(err, &re) && errors.Is(re.Cause, ctx.Err()):
			return status.FromContextError(ctx.Err()).Err()
		}
		return last
	}
}
