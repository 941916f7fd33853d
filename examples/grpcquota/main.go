// Command grpcquota is an example: a gRPC service that holds each caller to
// a quota and itself to a number of calls at once with moongrpc's server
// interceptors, and a client that calls it politely, waiting as long as the
// server asks through moongrpc's client interceptor.
//
// Serve, holding each API key (or, without one, each client address) to 2
// calls a second in bursts of 5, and 64 calls at once in all:
//
//	go run ./examples/grpcquota -listen 127.0.0.1:50051
//
// Call it ten times as alice; past the burst each call is refused with
// ResourceExhausted and a pushback, and the client sleeps that long and
// tries again:
//
//	go run ./examples/grpcquota -call 10 -addr 127.0.0.1:50051 -key alice
//
// The service is one method, /greeter.Greeter/Hello, which answers a name
// with a greeting. Its descriptor is written out below as protoc-gen-go-grpc
// would generate it, so the example needs no code generation; a real service
// registers its generated one the same way.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moongrpc"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "grpcquota:", err)
		os.Exit(1)
	}
}

// run is the whole program: it serves until ctx ends, or with -call makes
// that many calls and returns.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("grpcquota", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:50051", "address to serve on")
	rate := fs.Float64("rate", 2, "calls a second each caller earns")
	burst := fs.Float64("burst", 5, "calls a caller may make at once after a quiet spell")
	concurrent := fs.Int("concurrent", 64, "calls the server runs at once")
	calls := fs.Int("call", 0, "make this many calls to -addr instead of serving")
	addr := fs.String("addr", "127.0.0.1:50051", "address to call")
	key := fs.String("key", "", "API key to call with")
	timeout := fs.Duration("timeout", 10*time.Second, "deadline of each call, its retries included")
	if err := fs.Parse(args); err != nil {
		return err
	}

	eng := client.NewEngine()
	defer eng.Shutdown(context.Background())
	if *calls > 0 {
		return call(ctx, eng, *addr, *key, *calls, *timeout, out)
	}
	srv, err := newServer(eng, *rate, *burst, *concurrent)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "listening on %s\n", lis.Addr())
	return serve(ctx, srv, lis)
}

// serve runs srv on lis until ctx ends, then lets the calls under way
// finish.
func serve(ctx context.Context, srv *grpc.Server, lis net.Listener) error {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
		srv.GracefulStop()
		if err := <-served; !errors.Is(err, grpc.ErrServerStopped) { // stopped before it began serving: no failure
			return err
		}
		return nil
	}
}

// byAPIKey reads the caller's x-api-key metadata.
var byAPIKey = moongrpc.MetadataKey("x-api-key")

// callerKey keys a call by its API key, or by the caller's address when
// it sends none; the prefixes keep a key from posing as an address.
func callerKey(ctx context.Context, method string) string {
	if k := byAPIKey(ctx, method); k != "" {
		return "key:" + k
	}
	return "peer:" + moongrpc.PeerKey(ctx, method)
}

// newServer is the greeter behind a per-caller quota of rate calls a
// second in bursts of burst, and a gate of concurrent calls at once. Both
// limiters live on eng and stop when it shuts down.
func newServer(eng *client.Engine, rate, burst float64, concurrent int) (*grpc.Server, error) {
	quota, err := client.NewKeyedBucket(eng, rate, burst)
	if err != nil {
		return nil, err
	}
	gate, err := client.NewGate(eng, concurrent)
	if err != nil {
		return nil, err
	}
	limits := moongrpc.Config{Key: callerKey, Quota: quota, Gate: gate}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(moongrpc.UnaryServerInterceptor(limits)),
		grpc.ChainStreamInterceptor(moongrpc.StreamServerInterceptor(limits)),
	)
	srv.RegisterService(&greeterDesc, greeter{})
	return srv, nil
}

// call says hello n times as key, each call within timeout, retrying
// refusals as the server asks, and prints each outcome.
func call(ctx context.Context, eng *client.Engine, addr, key string, n int, timeout time.Duration, out io.Writer) error {
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(moongrpc.UnaryClientInterceptor(eng, client.DefaultBackoff)),
	)
	if err != nil {
		return err
	}
	defer conn.Close()
	name := "anonymous"
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-api-key", key)
		name = key
	}
	for i := 1; i <= n; i++ {
		reply, err := hello(ctx, conn, name, timeout)
		switch {
		case err == nil:
			fmt.Fprintf(out, "%d: %s\n", i, reply)
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			st := status.Convert(err)
			fmt.Fprintf(out, "%d: %v: %s%s\n", i, st.Code(), st.Message(), retryIn(st))
		}
	}
	return nil
}

// hello makes one call within timeout.
func hello(ctx context.Context, conn *grpc.ClientConn, name string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var reply wrapperspb.StringValue
	if err := conn.Invoke(ctx, helloMethod, wrapperspb.String(name), &reply); err != nil {
		return "", err
	}
	return reply.GetValue(), nil
}

// retryIn says when the server asked to be called again, if it did.
func retryIn(st *status.Status) string {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return fmt.Sprintf(" (retry in %v)", ri.GetRetryDelay().AsDuration())
		}
	}
	return ""
}

// The greeter service, as protoc-gen-go-grpc would generate it from
//
//	service Greeter { rpc Hello(google.protobuf.StringValue) returns (google.protobuf.StringValue); }
const helloMethod = "/greeter.Greeter/Hello"

type greeterServer interface {
	Hello(context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error)
}

var greeterDesc = grpc.ServiceDesc{
	ServiceName: "greeter.Greeter",
	HandlerType: (*greeterServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Hello",
		Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			if icpt == nil {
				return srv.(greeterServer).Hello(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: helloMethod}
			return icpt(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return srv.(greeterServer).Hello(ctx, req.(*wrapperspb.StringValue))
			})
		},
	}},
}

// greeter answers a name with a greeting.
type greeter struct{}

func (greeter) Hello(_ context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	name := in.GetValue()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "no name")
	}
	return wrapperspb.String("hello, " + name), nil
}
