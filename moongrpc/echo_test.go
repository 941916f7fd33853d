package moongrpc_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moongrpc"
	"github.com/moonpool-go/moonpool/moontest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The test service, written out as protoc-gen-go-grpc would generate it so
// the tests need no code generation: Say answers one string with one,
// Count answers one string with three.
const (
	sayMethod   = "/moongrpc.test.Echo/Say"
	countMethod = "/moongrpc.test.Echo/Count"
)

var echoDesc = grpc.ServiceDesc{
	ServiceName: "moongrpc.test.Echo",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Say", Handler: sayHandler}},
	Streams:     []grpc.StreamDesc{{StreamName: "Count", Handler: countHandler, ServerStreams: true}},
}

var countDesc = &echoDesc.Streams[0]

// echo counts the calls that reach it; answer, when set, decides each
// Say (its number from 1 on) instead of echoing.
type echo struct {
	calls  atomic.Int64
	answer func(ctx context.Context, n int64) error
}

func (e *echo) say(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	n := e.calls.Add(1)
	if e.answer != nil {
		if err := e.answer(ctx, n); err != nil {
			return nil, err
		}
	}
	return wrapperspb.String(in.GetValue()), nil
}

func sayHandler(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.StringValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	e := srv.(*echo)
	if icpt == nil {
		return e.say(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: sayMethod}
	return icpt(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return e.say(ctx, req.(*wrapperspb.StringValue))
	})
}

func countHandler(srv any, ss grpc.ServerStream) error {
	e := srv.(*echo)
	e.calls.Add(1)
	in := new(wrapperspb.StringValue)
	if err := ss.RecvMsg(in); err != nil {
		return err
	}
	for i := 1; i <= 3; i++ {
		if err := ss.SendMsg(wrapperspb.String(in.GetValue() + strconv.Itoa(i))); err != nil {
			return err
		}
	}
	return nil
}

// virtualEngine is an engine on a test clock, shut down with the test.
func virtualEngine(t *testing.T) (*moontest.Clock, *client.Engine) {
	t.Helper()
	clock := moontest.NewClock(t)
	eng := client.NewEngine(client.WithClock(clock))
	t.Cleanup(func() {
		if err := eng.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return clock, eng
}

// serve starts the echo service on 127.0.0.1 behind cfg's interceptors
// and dials it, with ci as the client's interceptor if not nil. Both are
// stopped with the test.
func serve(t *testing.T, e *echo, cfg moongrpc.Config, ci grpc.UnaryClientInterceptor) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(moongrpc.UnaryServerInterceptor(cfg)),
		grpc.StreamInterceptor(moongrpc.StreamServerInterceptor(cfg)),
	)
	srv.RegisterService(&echoDesc, e)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if ci != nil {
		opts = append(opts, grpc.WithUnaryInterceptor(ci))
	}
	conn, err := grpc.NewClient(lis.Addr().String(), opts...)
	if err != nil {
		srv.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		// A Stop that comes before Serve has begun makes Serve answer
		// ErrServerStopped: a test that ends that fast is no failure.
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("serve: %v", err)
		}
	})
	return conn
}

// say calls Say with key as the x-api-key metadata ("" for none), and
// returns the trailer with the error.
func say(ctx context.Context, conn *grpc.ClientConn, key string) (metadata.MD, error) {
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-api-key", key)
	}
	var trailer metadata.MD
	err := conn.Invoke(ctx, sayMethod, wrapperspb.String("hi"), new(wrapperspb.StringValue), grpc.Trailer(&trailer))
	return trailer, err
}

// cell is a value read and written from different goroutines.
type cell[T any] struct {
	mu sync.Mutex
	v  T
}

func (c *cell[T]) load() T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.v
}

func (c *cell[T]) store(v T) {
	c.mu.Lock()
	c.v = v
	c.mu.Unlock()
}
