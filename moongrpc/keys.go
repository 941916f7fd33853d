package moongrpc

import (
	"context"
	"net"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// MetadataKey returns a Config.Key that keys a call by the first value of
// the request metadata name (such as "x-api-key"; gRPC metadata names are
// lower case). A call without it is keyed "", so every such call shares
// one quota: a server that wants them refused should say so in its
// handler or an interceptor of its own before this one.
func MetadataKey(name string) func(ctx context.Context, fullMethod string) string {
	return func(ctx context.Context, _ string) string {
		if vs := metadata.ValueFromIncomingContext(ctx, name); len(vs) > 0 {
			return vs[0]
		}
		return ""
	}
}

// PeerKey is a Config.Key that keys a call by the address of the peer
// that sent it, without the port, so every connection from one host shares
// a quota. Behind a proxy that is the proxy's address: key by a metadata
// value the proxy sets instead. A call with no peer is keyed "".
func PeerKey(ctx context.Context, _ string) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	a := p.Addr.String()
	if host, _, err := net.SplitHostPort(a); err == nil {
		return host
	}
	return a
}
