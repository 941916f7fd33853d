package moongrpc

import (
	"strconv"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// PushbackTrailer is the trailer in which a server tells a client how many
// milliseconds to wait before retrying (gRFC A6). gRPC's own retry policy
// reads it: a non-negative whole number is the wait, anything else (a
// negative number, a word, two values) says "do not retry".
const PushbackTrailer = "grpc-retry-pushback-ms"

// dontRetry is the pushback that tells a client not to retry: any negative
// number does, per gRFC A6.
const dontRetry = "-1"

// pushback is the trailer value for a wait: whole milliseconds rounded up,
// so a client that honours it is never early; "-1" for client.Never, which
// no client should wait out.
func pushback(wait time.Duration) string {
	if wait >= client.Never {
		return dontRetry
	}
	ms := wait / time.Millisecond
	if ms*time.Millisecond < wait {
		ms++
	}
	return strconv.FormatInt(int64(ms), 10)
}

// refusal is the status and trailer for a call turned away with wait to go:
// with wait <= 0 nothing says when to come back, and the client's own
// backoff decides; with client.Never the trailer says not to retry and no
// RetryInfo is attached, since no delay it could carry would be true.
func refusal(st *status.Status, wait time.Duration) (*status.Status, metadata.MD) {
	if wait <= 0 {
		return st, nil
	}
	md := metadata.Pairs(PushbackTrailer, pushback(wait))
	if wait >= client.Never {
		return st, md
	}
	if with, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); err == nil {
		st = with
	}
	return st, md
}

// hint reads what a failed call says about retrying: from the pushback
// trailer and any RetryInfo detail, the longer of the two, so a client
// that honours it is never earlier than either asks. ok is false when the
// server said not to retry (a pushback that is negative, not a number, or
// given twice, as gRPC's own retry reads it); a zero wait with ok true
// means no hint.
func hint(st *status.Status, trailer metadata.MD) (wait time.Duration, ok bool) {
	if vs := trailer.Get(PushbackTrailer); len(vs) > 0 {
		if len(vs) > 1 {
			return 0, false
		}
		ms, err := strconv.ParseInt(vs[0], 10, 64)
		if err != nil || ms < 0 {
			return 0, false
		}
		wait = time.Duration(min(ms, int64(client.Never/time.Millisecond))) * time.Millisecond
	}
	for _, d := range st.Details() {
		if ri, is := d.(*errdetails.RetryInfo); is && ri.GetRetryDelay() != nil {
			wait = max(wait, ri.GetRetryDelay().AsDuration())
		}
	}
	return wait, true
}
