package moonredis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/redis/go-redis/v9"
)

// alone is a bucket on f's Redis, rate a second holding burst, through a
// client that ends a call at its ctx's deadline, with hooks h, under
// FailClosed, with MaxCalls calls, and then edit, if any, applied to its
// Config.
func alone(t *testing.T, f *fake, h redis.Hook, calls int, rate, burst float64, edit ...func(*Config)) *Bucket {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: f.mr.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	if h != nil {
		rdb.AddHook(h)
	}
	cfg := f.cfg()
	cfg.Client, cfg.FailMode, cfg.MaxCalls = rdb, FailClosed, calls
	for _, e := range edit {
		e(&cfg)
	}
	b, err := NewBucket(f.eng, cfg, rate, burst)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestQuietCallerCallsAlone: in a quiet limiter, each Allow makes its
// call on its caller's goroutine without the actor. A refusal it gets is
// remembered all the same: the next Allow of that key is answered
// without a call.
func TestQuietCallerCallsAlone(t *testing.T) {
	f := newFake(t)
	b := alone(t, f, nil, 0, 1, 2)
	for i := range 20 {
		if !b.Allow(fmt.Sprint("k", i)) {
			t.Fatalf("Allow %d of a fresh key refused", i)
		}
	}
	if a, s := b.l.asked.Load(), b.l.alone.Load(); a != 0 || s != 20 {
		t.Fatalf("20 Allows: %d through the actor, %d alone; want all alone", a, s)
	}
	b.Allow("x")
	b.Allow("x")
	if b.Allow("x") {
		t.Fatal("a bucket of 2 let a third through at once")
	}
	// The actor hears of the refusal after the caller has its answer.
	waitFor(t, "the refusal remembered", func() bool { return b.l.overs[b.l.cell("x")].Load() != 0 })
	calls := b.Stats().Calls
	if b.Allow("x") {
		t.Fatal("a refused key let through before its wait")
	}
	if st := b.Stats(); st.Calls != calls || st.Remembered != 1 {
		t.Errorf("Stats = %+v: the Allow after a refusal made a call, want it answered from the refusal", st)
	}
	f.advance(time.Second)
	if !b.Allow("x") {
		t.Error("Allow refused once a token came back")
	}
}

// TestAloneLateIsAFailure: a call a caller made alone whose reply comes
// after Config.Timeout on the engine's clock is answered by the FailMode
// and counted failed, as the late timer answers a call the actor sent.
// While the breaker counts that failure, the next request goes through
// the actor, and the success it brings lets callers call alone again.
func TestAloneLateIsAFailure(t *testing.T) {
	f := newFake(t)
	release := make(chan struct{})
	h, entered := holdFirst(release)
	b := alone(t, f, h, 0, 1, 5)
	first := make(chan bool, 1)
	go func() { first <- b.Allow("k0") }()
	recv(t, entered, "the first call held")
	f.advance(f.cfg().Timeout + time.Millisecond)
	close(release)
	if recv(t, first, "the late Allow") {
		t.Fatal("a reply past Timeout let the request through under FailClosed")
	}
	if st := b.Stats(); st.Failures != 1 || st.Fallbacks != 1 {
		t.Fatalf("Stats = %+v: want the late call failed and answered by the FailMode", st)
	}
	if b.l.steady.Load() {
		t.Fatal("callers still call alone after a failed call")
	}
	if !b.Allow("k1") || b.l.asked.Load() != 1 {
		t.Fatalf("the Allow after a failure: %d through the actor, want 1", b.l.asked.Load())
	}
	waitFor(t, "the breaker to count the success", b.l.steady.Load)
	alone := b.l.alone.Load()
	if !b.Allow("k2") || b.l.alone.Load() != alone+1 {
		t.Error("the Allow after a success did not call alone")
	}
}

// TestAloneCallFreesSlotForTheWaiting: with its one call slot held by a
// call a caller made alone, the next requests wait at the actor; when
// the call ends, its caller tells the actor, and they go together in one
// call.
func TestAloneCallFreesSlotForTheWaiting(t *testing.T) {
	f := newFake(t)
	release := make(chan struct{})
	h, entered := holdFirst(release)
	b := alone(t, f, h, 1, 1, 5)
	done := make(chan bool, 3)
	go func() { done <- b.Allow("k0") }()
	recv(t, entered, "the first call held")
	for i := range 2 {
		go func() { done <- b.Allow(fmt.Sprint("k", i+1)) }()
	}
	waitFor(t, "two callers at the actor", func() bool { return b.l.asked.Load() == 2 && b.l.starved.Load() })
	if n := b.l.alone.Load(); n != 1 {
		t.Fatalf("%d calls made alone, want the first", n)
	}
	close(release)
	for range 3 {
		if !recv(t, done, "an Allow") {
			t.Fatal("Allow of a fresh key refused")
		}
	}
	if st := b.Stats(); st.Calls != 2 || st.Sent != 3 {
		t.Errorf("Stats = %+v: want the two waiting requests in one call after the first", st)
	}
	if b.l.starved.Load() {
		t.Error("the actor still starved for a slot with none waiting")
	}
}

// TestCloseCutsAloneCall: Close cuts short a call a caller made alone,
// as it does the actor's, rather than wait for its Timeout (an hour
// here), and its caller is answered as closed.
func TestCloseCutsAloneCall(t *testing.T) {
	f := newFake(t)
	release := make(chan struct{})
	defer close(release)
	h, entered := holdFirst(release) // the call waits until its ctx ends
	b := alone(t, f, h, 0, 1, 5, func(c *Config) { c.Timeout = time.Hour })
	got := make(chan bool, 1)
	go func() { got <- b.Allow("k") }()
	recv(t, entered, "the call held")
	if b.l.alone.Load() != 1 {
		t.Fatal("the Allow did not call alone")
	}
	closed := make(chan error, 1)
	go func() { closed <- b.Close(context.Background()) }()
	if err := recv(t, closed, "Close"); err != nil {
		t.Errorf("Close = %v", err)
	}
	if recv(t, got, "the Allow") {
		t.Error("an Allow cut short by Close let through")
	}
	if st := b.Stats(); st.Admitted != 0 {
		t.Errorf("Stats = %+v", st)
	}
	if err := b.Wait(context.Background(), "k"); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Wait after Close = %v, want ErrClosed", err)
	}
}

// TestSteadyWaitsForUnheardFailures: callers call alone only when the
// breaker is closed, counts no failure, and no failed direct call is
// still on its way to the actor.
func TestSteadyWaitsForUnheardFailures(t *testing.T) {
	for _, c := range []struct {
		name            string
		tripped         bool
		failed, unheard int
		want            bool
	}{
		{"quiet", false, 0, 0, true},
		{"a failure counted", false, 1, 0, false},
		{"tripped", true, 0, 0, false},
		{"a failure not yet heard", false, 0, 1, false},
	} {
		o := &owner{l: &limiter{}, breaker: newBreaker(3, 1)}
		o.breaker.tripped, o.breaker.failed = c.tripped, c.failed
		o.l.unheard.Store(int64(c.unheard))
		o.l.steady.Store(!c.want)
		o.steadied()
		if got := o.l.steady.Load(); got != c.want {
			t.Errorf("%s: steady %v, want %v", c.name, got, c.want)
		}
	}
}

// TestHoldFrom: a failed direct call under FailLocal holds Redis to the
// local share for the recovery span from its failure, unless a hold
// lasts longer already or the breaker is tripped; under another mode it
// holds nothing.
func TestHoldFrom(t *testing.T) {
	const now = int64(1e12)
	span := int64(Config{Timeout: time.Second}.recovery())
	for _, c := range []struct {
		name      string
		mode      FailMode
		was, want int64
	}{
		{"none held", FailLocal, 0, now + span},
		{"an earlier hold ending sooner", FailLocal, now, now + span},
		{"a hold ending later", FailLocal, now + 2*span, now + 2*span},
		{"tripped", FailLocal, math.MaxInt64, math.MaxInt64},
		{"FailOpen", FailOpen, 0, 0},
	} {
		l := &limiter{cfg: Config{Timeout: time.Second, FailMode: c.mode}}
		l.held.Store(c.was)
		l.holdFrom(now)
		if got := l.held.Load(); got != c.want {
			t.Errorf("%s: held until %d, want %d", c.name, got, c.want)
		}
	}
}

// TestAloneFailureHoldsLocal: under FailLocal, a call made alone that
// fails is answered by the local share, and Redis is held to the local
// share from then on.
func TestAloneFailureHoldsLocal(t *testing.T) {
	f := newFake(t)
	release := make(chan struct{})
	h, entered := holdFirst(release)
	b := alone(t, f, h, 0, 1, 5, func(c *Config) { c.FailMode = FailLocal })
	first := make(chan bool, 1)
	go func() { first <- b.Allow("k0") }()
	recv(t, entered, "the first call held")
	f.advance(f.cfg().Timeout + time.Millisecond)
	close(release)
	if !recv(t, first, "the late Allow") {
		t.Error("the local share, full, refused the late Allow")
	}
	if b.l.held.Load() == 0 {
		t.Error("a failed call made alone left Redis unheld to the local share")
	}
	if st := b.Stats(); st.Failures != 1 || st.Fallbacks != 1 {
		t.Errorf("Stats = %+v: want the late call failed and answered by the FailMode", st)
	}
}
