package moongrpc

import (
	"context"
	"errors"
	"reflect"

	"github.com/moonpool-go/moonpool/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Quota is a limiter that decides a call in one turn and says, from the
// same decision, how long a refused caller must wait: *client.KeyedBucket
// and *client.KeyedWindow.
type Quota interface {
	Try(key string) client.Decision
}

// Gate is a concurrency limit a call holds for as long as it runs:
// *client.Gate.
type Gate interface {
	Enter() bool
	Leave()
}

// Config says what the server interceptors hold calls to. The zero Config
// holds nothing back: every call runs, and only the handler's own
// refusals are given their codes (see UnaryServerInterceptor).
type Config struct {
	// Key picks the key a call's quota is kept under, from its context
	// (metadata, peer) and its full method name ("/pkg.Service/Method").
	// nil puts every call under the one key "", a quota for the whole
	// server. See MetadataKey and PeerKey.
	Key func(ctx context.Context, fullMethod string) string
	// Quota holds each key to a rate or a quota; a refused call fails with
	// codes.ResourceExhausted and the wait, or with codes.Unavailable once
	// the quota is closed (see UnaryServerInterceptor). nil, or a nil
	// *client.KeyedBucket or *client.KeyedWindow, is none.
	Quota Quota
	// Gate caps the calls running at once; a call it turns away fails with
	// codes.Unavailable. nil, or a nil *client.Gate, is none.
	Gate Gate
	// Adaptive holds calls to a gate whose limit follows their latency. A
	// call waits in its line, the most important first, and one it
	// refuses fails with codes.Unavailable. nil is none. It is asked
	// after Gate and Quota: a call waiting in its line holds its Gate
	// room, and its quota token is spent even if Adaptive refuses it.
	Adaptive *client.AdaptiveGate
	// Priority says how important a call is, from its context and full
	// method name. The handler's ctx carries it (client.WithPriority), so
	// a client interceptor of this package sends it on. nil reads
	// PriorityKey (MetadataPriority("")) when Adaptive is set, and reads
	// nothing otherwise.
	Priority func(ctx context.Context, fullMethod string) client.Priority
}

// UnaryServerInterceptor holds each unary call to cfg before its handler
// runs. It never blocks: a call is let through or refused at once.
//
// The gate is asked first and the quota second, because room at the gate
// can be given back when the quota then refuses, and a quota's token
// cannot. A refused call never reaches the handler and gets:
//   - over its quota: codes.ResourceExhausted, with the decision's wait as
//     the grpc-retry-pushback-ms trailer (whole milliseconds, rounded up)
//     and as a google.rpc.RetryInfo detail. A wait that would never end (a
//     bucket that does not refill, a window of nothing) is a pushback of
//     -1, which tells gRPC clients not to retry, and no RetryInfo.
//   - refused by a quota that has been closed, or whose engine has shut
//     down (client.Decision.Closed): codes.Unavailable with no pushback,
//     as for a closed pool. The server is going away; the caller's quota
//     is not what refused it.
//   - turned away by the gate: codes.Unavailable with no pushback, since
//     nobody can say when a running call will finish; the client's own
//     backoff decides.
//   - refused by the adaptive gate: codes.Unavailable, with no pushback
//     when it is shed (the line was full of calls as important, it was
//     cut as the limit fell, or the gate is closed), and with the
//     expected wait as pushback when the call's deadline comes first.
//
// The adaptive gate is asked last, since a call may wait in its line: a
// call over its quota is refused before it takes a place there.
//
// A handler's own error that is not a gRPC status already and that
// matches client.ErrShed (a pool's breaker, shedder or waiter cap) or
// client.ErrClosed becomes codes.Unavailable, and a *client.WaitError (a
// wait past the caller's deadline) becomes codes.Unavailable carrying its
// Wait as above; other errors pass through untouched.
//
// A call waits only in the adaptive gate's line. When its ctx ends there
// it leaves the line and fails with codes.Canceled or
// codes.DeadlineExceeded. Past the gate, cancellation is the handler's
// business.
func UnaryServerInterceptor(cfg Config) grpc.UnaryServerInterceptor {
	g := newGuard(cfg)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, st, md, leave := g.admit(ctx, info.FullMethod)
		if st != nil {
			if md != nil {
				_ = grpc.SetTrailer(ctx, md) // fails only outside a server's call: nothing to tell then
			}
			return nil, st.Err()
		}
		defer leave()
		resp, err := handler(ctx, req)
		if st, md := handlerRefusal(err); st != nil {
			if md != nil {
				_ = grpc.SetTrailer(ctx, md)
			}
			return resp, st.Err()
		}
		return resp, err
	}
}

// StreamServerInterceptor holds each streaming call to cfg before its
// handler runs, as UnaryServerInterceptor does a unary one: a stream
// counts once against its quota however many messages it carries, and
// holds its room at the gate until the handler returns.
func StreamServerInterceptor(cfg Config) grpc.StreamServerInterceptor {
	g := newGuard(cfg)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, st, md, leave := g.admit(ss.Context(), info.FullMethod)
		if st != nil {
			if md != nil {
				ss.SetTrailer(md)
			}
			return st.Err()
		}
		defer leave()
		err := handler(srv, streamWith(ss, ctx))
		if st, md := handlerRefusal(err); st != nil {
			if md != nil {
				ss.SetTrailer(md)
			}
			return st.Err()
		}
		return err
	}
}

// guard is a Config made ready for calls: typed nils read as none.
type guard struct {
	key      func(context.Context, string) string
	quota    Quota
	gate     Gate
	adaptive *client.AdaptiveGate
	priority func(context.Context, string) client.Priority
}

func newGuard(cfg Config) *guard {
	g := &guard{key: cfg.Key, quota: cfg.Quota, gate: cfg.Gate, adaptive: cfg.Adaptive, priority: cfg.Priority}
	if g.adaptive != nil && g.priority == nil {
		g.priority = MetadataPriority("")
	}
	if isNil(g.quota) {
		g.quota = nil
	}
	if isNil(g.gate) {
		g.gate = nil
	}
	return g
}

// isNil says whether v is nil or a nil pointer in an interface, so a
// Config built from a limiter whose constructor failed is read as
// "none" rather than crashing the server on its first call.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}

// nothing is the leave of a call that took no room at the gate.
func nothing() {}

// admit decides one call: its ctx with its priority, and a nil status and
// the leave to run when the call is over, or the refusal and its trailer.
func (g *guard) admit(ctx context.Context, method string) (context.Context, *status.Status, metadata.MD, func()) {
	ctx = g.prioritize(ctx, method)
	leave := nothing
	if g.gate != nil {
		if !g.gate.Enter() {
			st, md := refusal(status.New(codes.Unavailable, "moonpool: too many calls at once"), 0)
			return ctx, st, md, nil
		}
		leave = g.gate.Leave
	}
	if g.quota != nil {
		key := ""
		if g.key != nil {
			key = g.key(ctx, method)
		}
		if d := g.quota.Try(key); !d.OK {
			leave()
			if d.Closed {
				return ctx, status.New(codes.Unavailable, "moonpool: quota closed"), nil, nil
			}
			st, md := refusal(status.New(codes.ResourceExhausted, "moonpool: quota exceeded"), d.Wait)
			return ctx, st, md, nil
		}
	}
	if g.adaptive != nil {
		st, md, then := g.enter(ctx, leave)
		return ctx, st, md, then
	}
	return ctx, nil, nil, leave
}

// handlerRefusal is the status for a handler's own moonpool refusal, or
// nil for any other error (a gRPC status already among them).
func handlerRefusal(err error) (*status.Status, metadata.MD) {
	if err == nil {
		return nil, nil
	}
	if _, ok := status.FromError(err); ok {
		return nil, nil
	}
	var we *client.WaitError
	switch {
	case errors.As(err, &we):
		return refusal(status.New(codes.Unavailable, err.Error()), we.Wait)
	case errors.Is(err, client.ErrShed), errors.Is(err, client.ErrClosed):
		return refusal(status.New(codes.Unavailable, err.Error()), 0)
	}
	return nil, nil
}
