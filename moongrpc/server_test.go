package moongrpc_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moongrpc"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// retryInfo is the RetryInfo delay err's status carries, if any.
func retryInfo(err error) (time.Duration, bool) {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

// A keyed bucket of two a second with bursts of two, keyed by API key: the
// burst goes through, the third call is refused with the wait in both
// forms, another key is untouched, and the wait is exact.
func TestQuotaRefusesWithPushbackAndRetryInfo(t *testing.T) {
	clock, eng := virtualEngine(t)
	quota, err := client.NewKeyedBucket(eng, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{}
	conn := serve(t, e, moongrpc.Config{Key: moongrpc.MetadataKey("x-api-key"), Quota: quota}, nil)
	ctx := t.Context()

	steps := []struct {
		key      string
		advance  time.Duration
		code     codes.Code
		pushback string // "" for no trailer
		wait     time.Duration
	}{
		{key: "a", code: codes.OK},
		{key: "a", code: codes.OK},
		{key: "a", code: codes.ResourceExhausted, pushback: "500", wait: 500 * time.Millisecond},
		{key: "b", code: codes.OK},
		{key: "a", advance: 200 * time.Millisecond, code: codes.ResourceExhausted, pushback: "300", wait: 300 * time.Millisecond},
		{key: "a", advance: 300 * time.Millisecond, code: codes.OK},
	}
	for i, s := range steps {
		clock.Advance(s.advance)
		trailer, err := say(ctx, conn, s.key)
		if got := status.Code(err); got != s.code {
			t.Fatalf("step %d: code %v, want %v (%v)", i, got, s.code, err)
		}
		if got := trailer.Get(moongrpc.PushbackTrailer); s.pushback == "" && len(got) != 0 || s.pushback != "" && (len(got) != 1 || got[0] != s.pushback) {
			t.Errorf("step %d: pushback %q, want %q", i, got, s.pushback)
		}
		wait, ok := retryInfo(err)
		if ok != (s.wait > 0) || wait != s.wait {
			t.Errorf("step %d: RetryInfo %v (%v), want %v", i, wait, ok, s.wait)
		}
	}
	if n := e.calls.Load(); n != 4 {
		t.Errorf("the handler ran %d times, want 4: a refused call must not reach it", n)
	}
}

// A wait that never ends (a bucket that earns nothing) tells the client
// not to retry, and carries no RetryInfo since no delay would be true.
func TestQuotaThatNeverRefillsSaysDoNotRetry(t *testing.T) {
	_, eng := virtualEngine(t)
	quota, err := client.NewKeyedWindow(eng, 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	drained, err := client.NewKeyedBucket(eng, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		quota    moongrpc.Quota
		first    codes.Code
		pushback string
		wait     time.Duration
	}{
		{"an hour's window", quota, codes.OK, "3600000", time.Hour},
		{"no rate", drained, codes.OK, "-1", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := serve(t, &echo{}, moongrpc.Config{Quota: c.quota}, nil)
			if _, err := say(t.Context(), conn, ""); status.Code(err) != c.first {
				t.Fatalf("first call: %v, want %v", err, c.first)
			}
			trailer, err := say(t.Context(), conn, "")
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("second call: %v, want ResourceExhausted", err)
			}
			if got := trailer.Get(moongrpc.PushbackTrailer); len(got) != 1 || got[0] != c.pushback {
				t.Errorf("pushback %q, want %q", got, c.pushback)
			}
			if wait, ok := retryInfo(err); ok != (c.wait > 0) || wait != c.wait {
				t.Errorf("RetryInfo %v (%v), want %v", wait, ok, c.wait)
			}
		})
	}
}

// A quota closed with the server, or on an engine that has shut down, is
// the server's state, not the caller's quota: Unavailable, as for a closed
// pool, with no pushback and no RetryInfo, so the client's backoff decides.
// So is a closed bucket that never refills, and a closed quota that does
// not say its numbers: the Decision says it is closed.
func TestClosedQuotaIsUnavailable(t *testing.T) {
	_, eng := virtualEngine(t)
	bucket, err := client.NewKeyedBucket(eng, 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	window, err := client.NewKeyedWindow(eng, 5, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	never, err := client.NewKeyedBucket(eng, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	hidden, err := client.NewKeyedWindow(eng, 5, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, gone := virtualEngine(t)
	orphan, err := client.NewKeyedWindow(gone, 5, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []interface{ Close(context.Context) error }{bucket, window, never, hidden} {
		if err := l.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := gone.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		quota moongrpc.Quota
	}{
		{"bucket", bucket},
		{"window", window},
		{"bucket that never refills", never},
		{"quota that does not say its numbers", tryOnly{hidden}},
		{"engine shut down", orphan},
	} {
		e := &echo{}
		conn := serve(t, e, moongrpc.Config{Quota: c.quota}, nil)
		trailer, err := say(t.Context(), conn, "")
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want Unavailable", c.name, err)
		}
		if got := trailer.Get(moongrpc.PushbackTrailer); len(got) != 0 {
			t.Errorf("%s: pushback %q, want none", c.name, got)
		}
		if wait, ok := retryInfo(err); ok {
			t.Errorf("%s: RetryInfo %v, want none", c.name, wait)
		}
		if n := e.calls.Load(); n != 0 {
			t.Errorf("%s: the handler ran %d times, want 0", c.name, n)
		}
	}
}

// tryOnly is a Quota with no other method: it does not say its numbers.
type tryOnly struct{ q moongrpc.Quota }

func (t tryOnly) Try(key string) client.Decision { return t.q.Try(key) }

// A gate of one: a second call while the first runs is turned away with
// Unavailable and no pushback; once the first is over there is room again.
// Room taken at the gate is given back when the quota then refuses.
func TestGateRefusesWhileFull(t *testing.T) {
	_, eng := virtualEngine(t)
	gate, err := client.NewGate(eng, 1)
	if err != nil {
		t.Fatal(err)
	}
	quota, err := client.NewKeyedBucket(eng, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	e := &echo{answer: func(ctx context.Context, n int64) error {
		if n == 1 {
			close(entered)
			<-release
		}
		return nil
	}}
	conn := serve(t, e, moongrpc.Config{Quota: quota, Gate: gate}, nil)
	ctx := t.Context()

	first := make(chan error, 1)
	go func() { _, err := say(ctx, conn, ""); first <- err }()
	<-entered
	trailer, err := say(ctx, conn, "")
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a call while the gate is full: %v, want Unavailable", err)
	}
	if got := trailer.Get(moongrpc.PushbackTrailer); len(got) != 0 {
		t.Errorf("a gate's refusal carries pushback %q; nobody knows when a call ends", got)
	}
	if _, ok := retryInfo(err); ok {
		t.Errorf("a gate's refusal carries a RetryInfo")
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the first call: %v", err)
	}
	if _, err := say(ctx, conn, ""); err != nil {
		t.Fatalf("a call after the first ended: %v", err)
	}
	if _, err := say(ctx, conn, ""); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a call past the quota: %v, want ResourceExhausted", err)
	}
	if held := gate.Held(); held != 0 {
		t.Errorf("the gate holds %d after every call ended; the quota's refusal kept its room", held)
	}
	if n := e.calls.Load(); n != 2 {
		t.Errorf("the handler ran %d times, want 2", n)
	}
}

// A stream counts once against its quota however many messages it
// carries; a refused stream ends with ResourceExhausted and the pushback
// in its trailer, and its handler never runs.
func TestStreamCountsOnce(t *testing.T) {
	_, eng := virtualEngine(t)
	quota, err := client.NewKeyedBucket(eng, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	gate, err := client.NewGate(eng, 1)
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{}
	conn := serve(t, e, moongrpc.Config{Quota: quota, Gate: gate}, nil)

	count := func() ([]string, grpc.ClientStream, error) {
		cs, err := conn.NewStream(t.Context(), countDesc, countMethod)
		if err != nil {
			return nil, nil, err
		}
		if err := cs.SendMsg(wrapperspb.String("n")); err != nil {
			return nil, cs, err
		}
		if err := cs.CloseSend(); err != nil {
			return nil, cs, err
		}
		var got []string
		for {
			m := new(wrapperspb.StringValue)
			if err := cs.RecvMsg(m); err != nil {
				if errors.Is(err, io.EOF) {
					return got, cs, nil
				}
				return got, cs, err
			}
			got = append(got, m.GetValue())
		}
	}
	got, _, err := count()
	if err != nil || len(got) != 3 {
		t.Fatalf("first stream: %q, %v; want three messages", got, err)
	}
	got, cs, err := count()
	if status.Code(err) != codes.ResourceExhausted || len(got) != 0 {
		t.Fatalf("second stream: %q, %v; want ResourceExhausted before any message", got, err)
	}
	if p := cs.Trailer().Get(moongrpc.PushbackTrailer); len(p) != 1 || p[0] != "250" {
		t.Errorf("pushback %q, want [250]", p)
	}
	if wait, _ := retryInfo(err); wait != 250*time.Millisecond {
		t.Errorf("RetryInfo %v, want 250ms", wait)
	}
	if n := e.calls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
	if held := gate.Held(); held != 0 {
		t.Errorf("the gate holds %d after both streams ended", held)
	}
}

// A handler's own moonpool refusals get the code they deserve, with the
// wait when there is one; gRPC statuses and other errors pass untouched.
func TestHandlerRefusalsBecomeUnavailable(t *testing.T) {
	var answer cell[error]
	e := &echo{answer: func(context.Context, int64) error { return answer.load() }}
	conn := serve(t, e, moongrpc.Config{}, nil)
	for _, c := range []struct {
		name     string
		err      error
		code     codes.Code
		pushback string
		wait     time.Duration
	}{
		{"overloaded", client.ErrOverloaded, codes.Unavailable, "", 0},
		{"breaker, wrapped", errors.Join(errors.New("query"), client.ErrBreaker), codes.Unavailable, "", 0},
		{"closed", client.ErrClosed, codes.Unavailable, "", 0},
		{"wait past the deadline", &client.WaitError{Wait: 1500*time.Millisecond + 1}, codes.Unavailable, "1501", 1500*time.Millisecond + 1},
		{"a status", status.Error(codes.NotFound, "no such thing"), codes.NotFound, "", 0},
		{"a status wrapping a refusal", status.Error(codes.Aborted, client.ErrShed.Error()), codes.Aborted, "", 0},
		{"anything else", errors.New("boom"), codes.Unknown, "", 0},
		{"no error", nil, codes.OK, "", 0},
	} {
		answer.store(c.err)
		trailer, err := say(t.Context(), conn, "")
		if status.Code(err) != c.code {
			t.Errorf("%s: %v, want %v", c.name, err, c.code)
		}
		if got := trailer.Get(moongrpc.PushbackTrailer); c.pushback == "" && len(got) != 0 || c.pushback != "" && (len(got) != 1 || got[0] != c.pushback) {
			t.Errorf("%s: pushback %q, want %q", c.name, got, c.pushback)
		}
		if wait, ok := retryInfo(err); ok != (c.wait > 0) || wait != c.wait {
			t.Errorf("%s: RetryInfo %v (%v), want %v", c.name, wait, ok, c.wait)
		}
	}
}

// A Config built from limiters whose constructors failed holds nothing
// back rather than crashing the server on its first call.
func TestNilLimitersAreNone(t *testing.T) {
	var quota *client.KeyedBucket
	var gate *client.Gate
	e := &echo{}
	conn := serve(t, e, moongrpc.Config{Quota: quota, Gate: gate}, nil)
	for range 3 {
		if _, err := say(t.Context(), conn, ""); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPeerKey(t *testing.T) {
	for _, c := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"tcp", peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 5555}}), "10.1.2.3"},
		{"ipv6", peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv6loopback, Port: 5555}}), "::1"},
		{"unix socket", peer.NewContext(context.Background(), &peer.Peer{Addr: &net.UnixAddr{Name: "/run/app.sock", Net: "unix"}}), "/run/app.sock"},
		{"no peer", context.Background(), ""},
		{"no address", peer.NewContext(context.Background(), &peer.Peer{}), ""},
	} {
		if got := moongrpc.PeerKey(c.ctx, sayMethod); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestMetadataKey(t *testing.T) {
	key := moongrpc.MetadataKey("x-api-key")
	in := func(kv ...string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs(kv...))
	}
	for _, c := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"present", in("x-api-key", "k1"), "k1"},
		{"twice: the first", in("x-api-key", "k1", "x-api-key", "k2"), "k1"},
		{"absent", in("other", "v"), ""},
		{"no metadata", context.Background(), ""},
	} {
		if got := key(c.ctx, sayMethod); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// Over a real connection PeerKey sees the loopback address, so two
// clients on one host share a quota.
func TestPeerKeyOverLoopback(t *testing.T) {
	_, eng := virtualEngine(t)
	quota, err := client.NewKeyedWindow(eng, 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var keys cell[string]
	key := func(ctx context.Context, m string) string { k := moongrpc.PeerKey(ctx, m); keys.store(k); return k }
	conn := serve(t, &echo{}, moongrpc.Config{Key: key, Quota: quota}, nil)
	if _, err := say(t.Context(), conn, ""); err != nil {
		t.Fatal(err)
	}
	if k := keys.load(); k != "127.0.0.1" {
		t.Errorf("keyed by %q, want 127.0.0.1", k)
	}
	if left := quota.Left("127.0.0.1"); left != 0 {
		t.Errorf("127.0.0.1 has %d left, want 0", left)
	}
}
