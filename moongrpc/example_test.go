package moongrpc_test

import (
	"context"
	"fmt"
	"net"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moongrpc"
	"github.com/moonpool-go/moonpool/moontest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A server holding each API key to two calls a second, in bursts of two:
// the third call in a row is refused, and told when to come back both in
// the trailer gRPC's own retries read and in a RetryInfo detail. (A
// virtual clock stands in for time here, so the waits print the same on
// every run; a server uses client.NewEngine() and the real one.)
func ExampleUnaryServerInterceptor() {
	eng := client.NewEngine(client.WithClock(moontest.NewClock(nil)))
	defer eng.Shutdown(context.Background())
	quota, _ := client.NewKeyedBucket(eng, 2, 2)

	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(moongrpc.UnaryServerInterceptor(moongrpc.Config{
		Key:   moongrpc.MetadataKey("x-api-key"),
		Quota: quota,
	})))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(lis)
	defer srv.Stop()

	conn, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k1")
	for range 3 {
		var trailer metadata.MD
		_, err := health.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
		st := status.Convert(err)
		fmt.Print(st.Code(), " pushback ", trailer.Get(moongrpc.PushbackTrailer))
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				fmt.Print(" RetryInfo ", ri.GetRetryDelay().AsDuration())
			}
		}
		fmt.Println()
	}
	// Output:
	// OK pushback []
	// OK pushback []
	// ResourceExhausted pushback [500] RetryInfo 500ms
}
