package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/moongrpc"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The program as a person runs it: served on a free port, a burst of
// five calls from one key past a burst of three gets exactly two refusals
// with the wait; another key and a caller without one are untouched; the
// program's own client, whose deadline is shorter than the wait, reports
// the refusal at once instead of sleeping; and the server stops when told.
func TestServeAndCall(t *testing.T) {
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	lines, w := io.Pipe()
	served := make(chan error, 1)
	// A rate of 0.01 a second earns nothing within the test, so the counts
	// do not depend on how fast the machine is.
	go func() { served <- run(ctx, []string{"-listen", "127.0.0.1:0", "-rate", "0.01", "-burst", "3"}, w) }()
	first, err := bufio.NewReader(lines).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(first), "listening on ")
	if !ok {
		t.Fatalf("the program said %q", first)
	}

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hi := func(key string) (metadata.MD, error) {
		cctx := t.Context()
		if key != "" {
			cctx = metadata.AppendToOutgoingContext(cctx, "x-api-key", key)
		}
		var trailer metadata.MD
		err := conn.Invoke(cctx, helloMethod, wrapperspb.String("test"), new(wrapperspb.StringValue), grpc.Trailer(&trailer))
		return trailer, err
	}
	refused := 0
	for i := range 5 {
		trailer, err := hi("alice")
		switch status.Code(err) {
		case codes.OK:
		case codes.ResourceExhausted:
			refused++
			if p := trailer.Get(moongrpc.PushbackTrailer); len(p) != 1 || p[0] == "" || p[0][0] == '-' {
				t.Errorf("call %d: pushback %q, want a wait", i, p)
			}
		default:
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if refused != 2 {
		t.Errorf("%d of 5 calls refused past a burst of 3, want 2", refused)
	}
	if _, err := hi("bob"); err != nil {
		t.Errorf("another key: %v", err)
	}
	if _, err := hi(""); err != nil {
		t.Errorf("a caller without a key: %v", err)
	}

	var out strings.Builder
	if err := run(t.Context(), []string{"-call", "2", "-addr", addr, "-key", "alice", "-timeout", "5s"}, &out); err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.Contains(line, "ResourceExhausted") || !strings.Contains(line, "retry in") {
			t.Errorf("client line %d: %q, want a refusal with its wait", i+1, line)
		}
	}

	stop()
	go io.Copy(io.Discard, lines)
	if err := <-served; err != nil {
		t.Errorf("run: %v", err)
	}
	w.Close()
}

// The client waits as long as the server asks and gets every call
// through: four calls as one key against a burst of two at one a second
// are refused twice, and the client sleeps twice, each time at least as
// long as it was told. Server and client keep clocks of their own, as on
// two machines; the client's sleeps move both.
func TestClientWaitsItsTurn(t *testing.T) {
	serverClock, clientClock := vclock.NewVirtual(), vclock.NewVirtual()
	serverEng := client.NewEngine(client.WithClock(serverClock))
	defer serverEng.Shutdown(context.Background())
	clientEng := client.NewEngine(client.WithClock(clientClock))
	defer clientEng.Shutdown(context.Background())
	srv, err := newServer(serverEng, 1, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, srv, lis) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()

	// Each sleep of the client's fires as soon as it is set, and moves the
	// server's clock as far.
	forward, halt := context.WithCancel(t.Context())
	moved := make(chan struct{})
	var slept []time.Duration
	go func() {
		defer close(moved)
		for clientClock.WaitPending(forward, 1) == nil {
			d, _ := clientClock.Next()
			slept = append(slept, d)
			serverClock.Advance(d)
			clientClock.AdvanceNext()
		}
	}()
	var out strings.Builder
	err = call(t.Context(), clientEng, lis.Addr().String(), "carol", 4, time.Minute, &out)
	halt()
	<-moved
	if err != nil {
		t.Fatal(err)
	}
	want := "1: hello, carol\n2: hello, carol\n3: hello, carol\n4: hello, carol\n"
	if out.String() != want {
		t.Errorf("the client printed\n%s\nwant\n%s", out.String(), want)
	}
	// The first refusal came with a full second to wait; the second with
	// what was left of the next token after the first sleep's jitter.
	if len(slept) != 2 || slept[0] < time.Second || slept[0]+slept[1] < 2*time.Second {
		t.Errorf("the client slept %v; want two sleeps, the first at least 1s, both at least 2s", slept)
	}
}
