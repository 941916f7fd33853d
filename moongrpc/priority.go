package moongrpc

import (
	"context"

	"github.com/moonpool-go/moonpool/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// PriorityKey is the metadata key that carries a call's priority between
// moonpool's clients and servers. Its value is a client.Priority name:
// "low", "normal", "high" or "critical".
const PriorityKey = "moonpool-priority"

// MetadataPriority returns a Config.Priority that reads a call's priority
// from the first value of the request metadata name (PriorityKey when name
// is empty). A call without it, or with a value that is not a priority's
// name, is client.PriorityNormal. Names are read in any case, with spaces
// around them or not.
//
// A client can send any metadata. Read this key only from callers you
// trust: have your edge proxy set or strip it, or give Config.Priority a
// func that decides from what the caller cannot choose (the method, an
// authenticated peer).
func MetadataPriority(name string) func(ctx context.Context, fullMethod string) client.Priority {
	if name == "" {
		name = PriorityKey
	}
	return func(ctx context.Context, _ string) client.Priority {
		vs := metadata.ValueFromIncomingContext(ctx, name)
		if len(vs) == 0 {
			return client.PriorityNormal
		}
		p, _ := client.ParsePriority(vs[0])
		return p
	}
}

// UnaryClientPriority is a unary client interceptor that sends the
// priority of the call's ctx (client.WithPriority) under PriorityKey, so a
// server's Config.Adaptive sees it. A ctx with client.PriorityNormal, or
// none, sends nothing. It adds no wait of its own. The retrying
// interceptors of this package send the priority already; use this one
// without them.
func UnaryClientPriority(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(outgoingPriority(ctx), method, req, reply, cc, opts...)
}

// StreamClientPriority is UnaryClientPriority for streams: the priority
// goes with the stream's opening.
func StreamClientPriority(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return streamer(outgoingPriority(ctx), desc, cc, method, opts...)
}

// outgoingPriority is ctx with its priority in the outgoing metadata
// under PriorityKey, in place of any value there. A ctx with
// client.PriorityNormal, or none, is returned as it is.
func outgoingPriority(ctx context.Context) context.Context {
	p := client.PriorityFrom(ctx)
	if p == client.PriorityNormal {
		return ctx
	}
	v := p.String()
	md, _ := metadata.FromOutgoingContext(ctx)
	switch vs := md.Get(PriorityKey); {
	case len(vs) == 0:
		return metadata.AppendToOutgoingContext(ctx, PriorityKey, v)
	case len(vs) == 1 && vs[0] == v:
		return ctx
	}
	md = md.Copy()
	md.Set(PriorityKey, v)
	return metadata.NewOutgoingContext(ctx, md)
}
