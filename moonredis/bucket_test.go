package moonredis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/policy"
)

// TestBucketSteps walks one key of a bucket of 1 a second, bursts of 3,
// through fixed instants: the burst, the refusal with its exact wait, the
// refill, and a key nobody used.
func TestBucketSteps(t *testing.T) {
	f := newFake(t)
	b, err := NewBucket(f.eng, f.cfg(), 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		at   time.Duration // since the start
		key  string
		n    float64
		want client.Decision
	}{
		{0, "a", 1, client.Decision{OK: true, Left: 2}},
		{0, "a", 2, client.Decision{OK: true, Left: 0}},
		{0, "a", 1, client.Decision{Wait: time.Second}},
		{0, "b", 1, client.Decision{OK: true, Left: 2}},
		{400 * time.Millisecond, "a", 1, client.Decision{Wait: 600 * time.Millisecond}},
		{time.Second, "a", 1, client.Decision{OK: true}},
		{time.Second, "a", 4, client.Decision{Wait: policy.Never}}, // above the burst: never
		{time.Second, "a", 0, client.Decision{OK: true}},           // nothing asked
		{3 * time.Second, "a", 2, client.Decision{OK: true}},
		{3 * time.Second, "a", 1, client.Decision{Wait: time.Second}},
	}
	start := f.clock.Now()
	for i, s := range steps {
		f.advance(time.Duration(start + int64(s.at) - f.clock.Now()))
		if got := b.TryN(s.key, s.n); got != s.want {
			t.Fatalf("step %d: TryN(%q, %v) at %v = %+v, want %+v", i, s.key, s.n, s.at, got, s.want)
		}
	}
	if got := b.Tokens("a"); got != 0 {
		t.Errorf("Tokens(a) = %v, want 0", got)
	}
	if got := b.Tokens("never"); got != 3 {
		t.Errorf("Tokens of a key not seen = %v, want the burst 3", got)
	}
	if got := b.Delay("a"); got != time.Second {
		t.Errorf("Delay(a) = %v, want 1s", got)
	}
	if got := b.Delay("never"); got != 0 {
		t.Errorf("Delay of a key not seen = %v, want 0", got)
	}
}

// TestBucketBatches: callers of one key that come while every call is
// out (here the one call of MaxCalls 1) go to Redis in one call, are
// answered in the order they came, and exactly the burst is let through.
func TestBucketBatches(t *testing.T) {
	f := newFake(t)
	release := make(chan struct{})
	h, entered := holdFirst(release)
	f.rdb.AddHook(h)
	cfg := f.cfg()
	cfg.MaxCalls = 1
	b, err := NewBucket(f.eng, cfg, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	const callers = 64
	results := make([]bool, callers)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); results[0] = b.Allow("hot") }()
	recv(t, entered, "the first call held")
	for i := 1; i < callers; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = b.Allow("hot") }()
	}
	waitFor(t, "callers to reach the actor", func() bool { return b.l.asked.Load() >= callers })
	close(release)
	waitGroup(t, &wg, "callers of a hot key")
	admitted := 0
	for _, ok := range results {
		if ok {
			admitted++
		}
	}
	st := b.Stats()
	if admitted != 10 || st.Admitted != 10 {
		t.Errorf("admitted %d (Stats %d), want the burst 10", admitted, st.Admitted)
	}
	if st.Calls != 2 {
		t.Errorf("%d calls for %d callers, want 2: the first, then the rest together", st.Calls, callers)
	}
}

// TestBucketWaitFIFO: waiters of one key take slots in the order they
// asked, each wakes at its own slot on the engine's clock, and a caller
// whose slot would come after its deadline is told so at once and takes
// nothing.
func TestBucketWaitFIFO(t *testing.T) {
	f := newFake(t)
	b := spent(t, f, f.cfg(), 10) // a token every 100 ms
	const waiters = 4
	order := make(chan int, waiters)
	errs := make(chan error, waiters)
	for i := range waiters {
		go func() {
			err := b.Wait(context.Background(), "k")
			errs <- err
			order <- i
		}()
		asleep(t, f, &b.l, i+1) // until its slot
	}
	// A caller with 250 ms to go faces a slot 500 ms away.
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	var we *client.WaitError
	if err := b.Wait(ctx, "k"); !errors.As(err, &we) || we.Wait != 500*time.Millisecond {
		t.Fatalf("Wait past the deadline = %v, want a *WaitError of 500ms", err)
	}
	for i := range waiters {
		f.advance(100 * time.Millisecond)
		if err := recv(t, errs, "a waiter at its slot"); err != nil {
			t.Fatalf("waiter %d: %v", i, err)
		}
		if got := recv(t, order, "a waiter at its slot"); got != i {
			t.Fatalf("woke waiter %d at slot %d", got, i)
		}
	}
	// The refused caller took nothing: the next slot is 100 ms on.
	if got := b.Delay("k"); got != 100*time.Millisecond {
		t.Errorf("Delay after the waiters = %v, want 100ms", got)
	}
}

// TestBucketBadInput: numbers that cannot make a bucket are errors, not
// panics, and so is a missing client.
func TestBucketBadInput(t *testing.T) {
	f := newFake(t)
	for _, rate := range []float64{0, -1, nanf(), inff()} {
		if _, err := NewBucket(f.eng, f.cfg(), rate, 1); err == nil {
			t.Errorf("NewBucket with rate %v: no error", rate)
		}
	}
	if _, err := NewBucket(f.eng, Config{}, 1, 1); err == nil {
		t.Error("NewBucket without a client: no error")
	}
	if _, err := NewBucket(nil, f.cfg(), 1, 1); err == nil {
		t.Error("NewBucket without an engine: no error")
	}
	b, err := NewBucket(f.eng, f.cfg(), 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WaitN(context.Background(), "k", 3); !errors.Is(err, client.ErrExceedsBurst) {
		t.Errorf("WaitN above the burst = %v, want ErrExceedsBurst", err)
	}
	if b.AllowN("k", nanf()) {
		t.Error("AllowN(NaN) allowed")
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b.Allow("k") || b.Delay("k") != policy.Never || b.Tokens("k") != 0 {
		t.Error("a closed bucket still answers")
	}
	if err := b.Wait(context.Background(), "k"); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Wait after Close = %v, want ErrClosed", err)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// TestKeysShareACall: with every call slot taken, requests for other keys
// wait in the actor and go to Redis together, in one round trip, each key
// answered by its own state.
func TestKeysShareACall(t *testing.T) {
	f := newFake(t)
	release := make(chan struct{})
	h, entered := holdFirst(release)
	f.rdb.AddHook(h)
	cfg := f.cfg()
	cfg.MaxCalls = 1
	b, err := NewBucket(f.eng, cfg, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	const keys, each = 20, 3
	var allowed [keys]atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if b.Allow("k0") {
			allowed[0].Add(1)
		}
	}()
	recv(t, entered, "the first call held")
	for i := 1; i < keys; i++ {
		for range each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if b.Allow(fmt.Sprint("k", i)) {
					allowed[i].Add(1)
				}
			}()
		}
	}
	waitFor(t, "callers to reach the actor", func() bool { return b.l.asked.Load() >= 1+(keys-1)*each })
	close(release)
	waitGroup(t, &wg, "callers of many keys")
	for i := 1; i < keys; i++ {
		if got := allowed[i].Load(); got != 2 {
			t.Errorf("key k%d let %d of %d through, want its burst 2", i, got, each)
		}
	}
	if st := b.Stats(); st.Calls != 2 || st.Sent != 1+(keys-1)*each {
		t.Errorf("Stats = %+v: want 2 calls, the held one and one for the other %d keys", st, keys-1)
	}
}

// TestCloseAnswersEveryone: Close answers the caller whose call is in
// flight and the one waiting behind it, and cuts the call short rather
// than waiting for Redis.
func TestCloseAnswersEveryone(t *testing.T) {
	f := newFake(t)
	h, entered := holdFirst(make(chan struct{})) // Redis never answers
	f.rdb.AddHook(h)
	b, err := NewBucket(f.eng, f.cfg(), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- b.Wait(context.Background(), "k") }()
	recv(t, entered, "the first call held")
	allowed := make(chan bool, 1)
	go func() { allowed <- b.Allow("k") }()
	waitFor(t, "callers to reach the actor", func() bool { return b.l.asked.Load() >= 2 })
	if err := b.Close(context.Background()); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := recv(t, waited, "the waiter in flight after Close"); !errors.Is(err, client.ErrClosed) {
		t.Errorf("the waiter in flight got %v, want ErrClosed", err)
	}
	if recv(t, allowed, "the caller behind it after Close") {
		t.Error("the caller behind it was allowed by a closed bucket")
	}
}

// TestWaitGivesUp: a Wait whose ctx ends while its call is in flight
// returns ctx's error at once; the call's late answer harms nobody.
func TestWaitGivesUp(t *testing.T) {
	f := newFake(t)
	release := make(chan struct{})
	h, entered := holdFirst(release)
	f.rdb.AddHook(h)
	b, err := NewBucket(f.eng, f.cfg(), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() { waited <- b.Wait(ctx, "k") }()
	recv(t, entered, "the first call held")
	cancel()
	if err := recv(t, waited, "Wait after cancel"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel = %v, want context.Canceled", err)
	}
	close(release)
	// The slot it took is spent: fewer let through, never more.
	waitFor(t, "the call to land", func() bool { return b.l.flying.Load() == 0 })
	if b.Allow("k") {
		t.Error("the abandoned waiter's token was handed out again")
	}
}

// TestBucketExpirySteps: under random arrivals, a bucket's key is kept
// until its bucket is full again and at least twice Config.Timeout past
// every write (so a resent batch finds its kept answer), and is gone
// within two steps of its expiry (here a second) past that; and its
// expiry is set about once per step its state moves through, not on every
// write.
func TestBucketExpirySteps(t *testing.T) {
	f := newFake(t)
	cfg := f.cfg()
	cfg.Timeout = 300 * time.Millisecond // kept at least 600 ms; steps of a second
	const G = time.Second
	b, err := NewBucket(f.eng, cfg, 10, 50) // a token in 100 ms, full in 5 s
	if err != nil {
		t.Fatal(err)
	}
	const key = "moonredis:bucket:k"
	rng := rand.New(rand.NewPCG(7, 12))
	var writes, sets int
	var expiry, first, tat int64
	for range 3000 {
		f.advance(time.Duration(rng.IntN(250)) * time.Millisecond)
		if !b.AllowN("k", float64(1+rng.IntN(3))) {
			continue
		}
		writes++
		now := f.clock.Now()
		ttl := f.mr.TTL(key)
		us, err := strconv.ParseInt(f.mr.HGet(key, "t"), 10, 64) // microseconds
		if err != nil {
			t.Fatalf("field t: %v", err)
		}
		tat = us * int64(time.Microsecond)
		if first == 0 {
			first = tat
		}
		full := time.Duration(tat - now) // until the bucket is full again
		if ttl < max(full, 2*cfg.Timeout) {
			t.Fatalf("write %d: the key expires in %v, before its bucket is full again (%v) or within twice the Timeout", writes, ttl, full)
		}
		if most := max(full, 2*cfg.Timeout) + 2*G + time.Millisecond; ttl > most {
			t.Fatalf("write %d: the key expires in %v, more than two steps past its bucket being full again (%v) and twice the Timeout", writes, ttl, full)
		}
		if e := now + int64(ttl); e != expiry {
			sets++
			expiry = e
		}
	}
	steps := int((tat-first)/int64(G)) + 2
	if writes < 1000 || sets > steps {
		t.Errorf("the expiry was set %d times in %d writes whose state moved through %d steps: want at most one a step", sets, writes, steps)
	}
}

// TestBucketKeysExpireApart: keys first written at different instants
// expire as far apart, each at the phase it was made at, not together at
// the edge of one step of a grid shared by all keys.
func TestBucketKeysExpireApart(t *testing.T) {
	f := newFake(t)
	cfg := f.cfg()
	cfg.Timeout = 300 * time.Millisecond // kept at least 600 ms; steps of a second
	b, err := NewBucket(f.eng, cfg, 10, 50)
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := range 12 {
		key := fmt.Sprint("k", i)
		if !b.Allow(key) {
			t.Fatalf("%s: a full bucket refused", key)
		}
		ttl := f.mr.TTL("moonredis:bucket:" + key)
		if ttl < 1600*time.Millisecond || ttl > 2601*time.Millisecond {
			t.Errorf("%s expires in %v, want one to two steps of a second past the 601 ms it needs", key, ttl)
		}
		at := f.clock.Now()/1e6 + ttl.Milliseconds()
		if i > 0 && (at-last < 89 || at-last > 91) {
			t.Errorf("%s, made 90 ms after the key before it, expires %d ms after it", key, at-last)
		}
		last = at
		f.advance(90 * time.Millisecond)
	}
}

// TestBucketKeptForEveryTimeout: processes sharing a key with different
// Timeouts keep its state for all of them. A bucket with a short Timeout
// writes the key first, one with a long Timeout queues waiters far past
// that key's expiry, and the key must outlive them: each write reads the
// expiry there is, whoever set it. A bucket that set the expiry from its
// own Timeout alone, without reading the key's, would leave the first
// one's short expiry: the key would vanish, and the first bucket would
// let a request through ahead of the waiters.
func TestBucketKeptForEveryTimeout(t *testing.T) {
	f := newFake(t)
	short, long := f.cfg(), f.cfg()
	short.Timeout, long.Timeout = 100*time.Millisecond, 5*time.Second
	a, err := NewBucket(f.eng, short, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBucket(f.eng, long, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	f.advance(500 * time.Millisecond)
	if !a.Allow("k") {
		t.Fatal("a full bucket refused")
	}
	const waiters = 5
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() {
			if err := b.Wait(context.Background(), "k"); err != nil {
				t.Errorf("Wait = %v", err)
			}
		})
	}
	waitFor(t, fmt.Sprint(waiters, " waiters asleep"), func() bool {
		return b.l.flying.Load() == 0 && f.clock.Pending() == waiters+lateTimers(&a.l, &b.l)
	})
	f.advance(3 * time.Second) // past what a's Timeout alone would keep the key for
	if a.Allow("k") {
		t.Error("let through ahead of waiters holding the bucket for 3 s more: the key's state was lost")
	}
	f.advance(10 * time.Second)
	waitGroup(t, &wg, "waiters past their slots")
}

// TestWaitWakesAfterItsSlot: a waiter wakes at its slot measured from when
// its answer came back, never before the slot: measured from the sending,
// it would wake early by the call's way there.
func TestWaitWakesAfterItsSlot(t *testing.T) {
	f := newFake(t)
	b := spent(t, f, f.cfg(), 10) // a token every 100 ms
	release := make(chan struct{})
	h, entered := holdFirst(release)
	f.rdb.AddHook(h)
	waited := make(chan error, 1)
	go func() { waited <- b.Wait(context.Background(), "k") }()
	recv(t, entered, "the first call held")
	f.advance(50 * time.Millisecond) // the script runs 50 ms after the sending
	close(release)
	asleep(t, f, &b.l, 1)
	if d, _ := f.clock.Next(); d != 50*time.Millisecond {
		t.Errorf("the waiter sleeps %v more, want the 50ms to its slot", d)
	}
	f.advance(50 * time.Millisecond)
	if err := recv(t, waited, "Wait at its slot"); err != nil {
		t.Fatal(err)
	}
}

// TestWaitSlotBackTooLate: a slot the script kept within the deadline, as
// seen from the sending, that falls past it as seen from when the answer
// came back is the deadline's error at once, not a wake before the slot.
func TestWaitSlotBackTooLate(t *testing.T) {
	f := newFake(t)
	cfg := f.cfg()
	cfg.Timeout = 2 * time.Hour
	b := spent(t, f, cfg, 1.0/600) // a token every 10 minutes
	release := make(chan struct{})
	h, entered := holdFirst(release)
	f.rdb.AddHook(h)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- b.Wait(ctx, "k") }()
	recv(t, entered, "the first call held")
	f.clock.Advance(55 * time.Minute) // Redis answers at once; the answer takes 55 minutes back
	close(release)
	got := recv(t, waited, "Wait whose slot came back too late")
	if !errors.Is(got, context.DeadlineExceeded) {
		t.Errorf("Wait = %v, want an error matching context.DeadlineExceeded", got)
	}
}

// TestBucketTatRoundsUp: a bucket whose token interval is not a whole
// number of microseconds keeps its state rounded up, never down, so a
// request a fraction of a microsecond early is refused.
func TestBucketTatRoundsUp(t *testing.T) {
	f := newFake(t)
	b := spent(t, f, f.cfg(), 3) // a token every 333,333.33 µs
	f.advance(333333 * time.Microsecond)
	if d := b.Try("k"); d.OK || d.Wait != time.Microsecond {
		t.Errorf("Try a third of a microsecond early = %+v, want a refusal of 1µs", d)
	}
	f.advance(time.Microsecond)
	if !b.Allow("k") {
		t.Error("Allow refused once the token is whole")
	}
}

// TestKeptAnswerOutlivesRetries: a key whose state would expire within a
// millisecond (a bucket full again that soon) is kept at least twice
// Config.Timeout, so a batch go-redis sends again within the call's
// Timeout still finds its answer rather than being counted again; and,
// idle, it is gone within two of its expiry's steps (twice the Timeout,
// here 3 s) past that.
func TestKeptAnswerOutlivesRetries(t *testing.T) {
	f := newFake(t)
	cfg := f.cfg()
	cfg.Timeout = 1500 * time.Millisecond
	b, err := NewBucket(f.eng, cfg, 1000, 5) // a token a millisecond
	if err != nil {
		t.Fatal(err)
	}
	b.Allow("k")
	f.advance(2900 * time.Millisecond) // past the Timeout, within twice it
	if !f.mr.Exists("moonredis:bucket:k") {
		t.Error("the key and its kept answer expired within twice the call's Timeout")
	}
	f.advance(6200 * time.Millisecond) // twice the Timeout and two steps on
	if f.mr.Exists("moonredis:bucket:k") {
		t.Error("an idle, full key is still in Redis two of its expiry's steps after its kept answer stopped mattering")
	}
}
