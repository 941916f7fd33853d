package moongrpc

import (
	"context"
	"errors"

	"github.com/moonpool-go/moonpool/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// prioritize is ctx with the call's priority in it, when the guard reads
// priorities; ctx as it is otherwise.
func (g *guard) prioritize(ctx context.Context, method string) context.Context {
	if g.priority == nil {
		return ctx
	}
	if p := g.priority(ctx, method); p != client.PriorityFrom(ctx) {
		return client.WithPriority(ctx, p)
	}
	return ctx
}

// enter waits for room at the adaptive gate. It returns a nil status and
// the leave to run when the call is over, which runs then's too; or the
// refusal and its trailer, having run then itself.
func (g *guard) enter(ctx context.Context, then func()) (*status.Status, metadata.MD, func()) {
	pass, err := g.adaptive.Enter(ctx)
	if err == nil {
		return nil, nil, func() {
			pass.Leave()
			then()
		}
	}
	then()
	var we *client.WaitError
	switch {
	case errors.As(err, &we):
		st, md := refusal(status.New(codes.Unavailable, err.Error()), we.Wait)
		return st, md, nil
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return status.FromContextError(ctx.Err()), nil, nil
	}
	st, md := refusal(status.New(codes.Unavailable, err.Error()), 0)
	return st, md, nil
}

// streamWith is ss answering ctx for its Context, so the handler sees the
// priority the interceptor read; ss itself when ctx is its own.
func streamWith(ss grpc.ServerStream, ctx context.Context) grpc.ServerStream {
	if ctx == ss.Context() {
		return ss
	}
	return &contextStream{ServerStream: ss, ctx: ctx}
}

// contextStream is a ServerStream with another ctx.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *contextStream) Context() context.Context { return s.ctx }
