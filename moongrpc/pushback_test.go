package moongrpc

import (
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The trailer rounds up, so a client that honours it is never early.
func TestPushbackRoundsUp(t *testing.T) {
	for _, c := range []struct {
		wait time.Duration
		want string
	}{
		{time.Nanosecond, "1"},
		{time.Millisecond, "1"},
		{time.Millisecond + 1, "2"},
		{1500 * time.Millisecond, "1500"},
		{24 * time.Hour, "86400000"},
		{client.Never - 1, "9223372036855"},
		{client.Never, "-1"},
	} {
		if got := pushback(c.wait); got != c.want {
			t.Errorf("pushback(%v) = %q, want %q", c.wait, got, c.want)
		}
	}
}

// hint reads both carriers as gRPC's retry reads the trailer: the longer
// of the two, and "do not retry" for a pushback that is negative, not a
// number, or given twice.
func TestHint(t *testing.T) {
	withInfo := func(d time.Duration) *status.Status {
		st, err := status.New(codes.Unavailable, "busy").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	plain := status.New(codes.Unavailable, "busy")
	for _, c := range []struct {
		name    string
		st      *status.Status
		trailer metadata.MD
		wait    time.Duration
		ok      bool
	}{
		{"nothing", plain, nil, 0, true},
		{"trailer", plain, metadata.Pairs(PushbackTrailer, "250"), 250 * time.Millisecond, true},
		{"zero trailer", plain, metadata.Pairs(PushbackTrailer, "0"), 0, true},
		{"RetryInfo", withInfo(2 * time.Second), nil, 2 * time.Second, true},
		{"both, RetryInfo longer", withInfo(2 * time.Second), metadata.Pairs(PushbackTrailer, "250"), 2 * time.Second, true},
		{"both, trailer longer", withInfo(time.Second), metadata.Pairs(PushbackTrailer, "3000"), 3 * time.Second, true},
		{"negative RetryInfo", withInfo(-time.Second), nil, 0, true},
		{"negative trailer", withInfo(time.Second), metadata.Pairs(PushbackTrailer, "-1"), 0, false},
		{"not a number", plain, metadata.Pairs(PushbackTrailer, "soon"), 0, false},
		{"twice", plain, metadata.Pairs(PushbackTrailer, "1", PushbackTrailer, "2"), 0, false},
		{"past Never", plain, metadata.Pairs(PushbackTrailer, "9223372036854775807"), client.Never / time.Millisecond * time.Millisecond, true},
	} {
		wait, ok := hint(c.st, c.trailer)
		if wait != c.wait || ok != c.ok {
			t.Errorf("%s: %v, %v; want %v, %v", c.name, wait, ok, c.wait, c.ok)
		}
	}
}

// What refusal hands out is what hint reads back.
func TestRefusalRoundTrip(t *testing.T) {
	for _, wait := range []time.Duration{time.Millisecond, 1234567 * time.Microsecond, time.Hour} {
		st, md := refusal(status.New(codes.ResourceExhausted, "quota"), wait)
		got, ok := hint(st, md)
		if !ok || got < wait || got >= wait+time.Millisecond {
			t.Errorf("refusal(%v) reads back as %v, %v", wait, got, ok)
		}
	}
	if st, md := refusal(status.New(codes.Unavailable, "busy"), 0); md != nil || len(st.Details()) != 0 {
		t.Errorf("a refusal with no wait carries %v and %v", md, st.Details())
	}
	if _, ok := hint(refusal(status.New(codes.ResourceExhausted, "never"), client.Never)); ok {
		t.Errorf("a refusal that never ends reads as worth retrying")
	}
}
