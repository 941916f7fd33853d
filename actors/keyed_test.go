package actors

import (
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
)

// keys asks a keyed actor how many keys it holds.
func keys(ref *engine.Ref) int { return keyRoom(ref)[0] }

// keyRoom asks a keyed actor how many keys it holds and how many it has
// room for without growing.
func keyRoom(ref *engine.Ref) [2]int {
	m := &keyCount{reply: make(chan [2]int, 1)}
	ref.Send(m)
	return <-m.reply
}

func TestKeyedIndependent(t *testing.T) {
	r := newHarness(t)
	ref, err := SpawnKeyedBucket(r.e, "", 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	s := time.Second
	steps := []struct {
		key   string
		at    time.Duration
		n     float64
		ok    bool
		after time.Duration
	}{
		{"a", 0, 2, true, 0},
		{"a", 0, 1, false, s},
		{"b", 0, 2, true, 0}, // a's emptiness is a's alone
		{"b", 0, 3, false, 1<<63 - 1},
		{"a", s, 1, true, 0},
		{"", 0, 1, true, 0}, // the empty key is a key like any other
		{"a", s, 1, false, s},
		{"b", 2 * s, 2, true, 0},
	}
	for i, st := range steps {
		p := ask(ref, st.key, r.at(st.at), st.n)
		if p.OK != st.ok || p.After != st.after {
			t.Fatalf("step %d: Allow(%q, %v at +%v) = %+v, want OK %v After %v", i, st.key, st.n, st.at, p, st.ok, st.after)
		}
	}
	for key, want := range map[string]float64{"a": 1, "b": 0, "": 2, "never seen": 2} {
		if got := left(ref, key, r.at(2*s)); got != want {
			t.Fatalf("Left(%q) = %v, want %v", key, got, want)
		}
	}
	if n := keys(ref); n != 3 {
		t.Fatalf("%d keys, want 3: a Left must not make one", n)
	}
}

// TestKeyedForgets: 100,000 keys that came once are all forgotten once
// their buckets are full again, by the actor's own Ticks, with no more
// calls; a key that keeps coming stays.
func TestKeyedForgets(t *testing.T) {
	r := newHarness(t)
	ref, err := SpawnKeyedBucket(r.e, "", 1, 1) // full a second after a take
	if err != nil {
		t.Fatal(err)
	}
	const many = 100_000
	a := &Allow{Key: "hot", N: 1, Reply: make(chan Permit, 1)}
	for i := range many {
		a.Now = r.t0 + int64(i)*int64(time.Microsecond) // 100,000 in a tenth of a second
		a.Key = "k" + strconv.Itoa(i)
		ref.Send(a)
		if p := <-a.Reply; !p.OK {
			t.Fatalf("key %d: %+v", i, p)
		}
	}
	if n := keys(ref); n != many {
		t.Fatalf("%d keys after %d distinct ones in a tenth of a second, want all", n, many)
	}
	r.advance(ref, 2*time.Second)
	if n := keyRoom(ref); n[0] != 0 || n[1] > 1024 {
		t.Fatalf("%d keys in room for %d two seconds after the last call, want none, and the room given back", n[0], n[1])
	}

	// Under traffic: a hot key stays, cold ones go as calls go by.
	now := r.clock.Now()
	for i := range 1000 {
		ask(ref, fmt.Sprint("cold", i), now, 1)
	}
	// Twice what the rate gives, so the hot bucket is never full again.
	for i := range 2500 {
		ask(ref, "hot", now+int64(i)*int64(2*time.Millisecond), 0.004)
	}
	if n := keys(ref); n != 1 {
		t.Fatalf("%d keys after five seconds of only the hot one, want 1", n)
	}
	if got := left(ref, "cold7", now+int64(5*time.Second)); got != 1 {
		t.Fatalf("a forgotten key has %v left, want a full bucket", got)
	}
}

// TestKeyedWindowForgets: a window key goes once its window is empty, not
// before: forgetting early would let its events count again.
func TestKeyedWindowForgets(t *testing.T) {
	r := newHarness(t)
	ref, err := SpawnKeyedWindow(r.e, "", 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ask(ref, "x", r.t0, 1)
	ask(ref, "x", r.at(30*time.Second), 1)
	if p := ask(ref, "x", r.at(59*time.Second), 1); p.OK || p.After != time.Second {
		t.Fatalf("full window: %+v", p)
	}
	r.advance(ref, 80*time.Second) // the +30s event is still in
	if n := keys(ref); n != 1 {
		t.Fatalf("%d keys while an event still counts, want 1", n)
	}
	if got := left(ref, "x", r.at(80*time.Second)); got != 1 {
		t.Fatalf("Left = %v, want 1", got)
	}
	r.advance(ref, 20*time.Second) // +100s: empty, and the slack (7.5s) passed
	if n := keys(ref); n != 0 {
		t.Fatalf("%d keys with the window empty, want 0", n)
	}
}

// TestKeyedWaiters: each key's parked callers are woken at that key's own
// instant, earliest first, and a key is not forgotten while one waits.
func TestKeyedWaiters(t *testing.T) {
	r := newHarness(t)
	ref, err := SpawnKeyedBucket(r.e, "", 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	s := time.Second
	ask(ref, "a", r.t0, 3)
	ask(ref, "b", r.t0, 3)
	a := park(ref, "a", r.t0, 3, 0) // +3s
	b := park(ref, "b", r.t0, 1, 0) // +1s
	b2 := park(ref, "b", r.t0, 1, r.at(2*s))
	if p := answer(park(ref, "b", r.t0, 1, r.at(2*s))); !errors.Is(p.Err, ErrDeadline) || p.After != 3*s {
		t.Fatalf("third in b's line: %+v, want ErrDeadline After 3s", p)
	}
	left(ref, "", r.t0)
	if d, ok := r.clock.Next(); !ok || d != s {
		t.Fatalf("timer in %v, want 1s (b's head)", d)
	}
	r.advance(ref, s)
	if p := answer(b); !p.OK {
		t.Fatalf("b: %+v", p)
	}
	left(ref, "", r.clock.Now())
	unanswered(t, "a at +1s", a)
	r.advance(ref, s)
	if p := answer(b2); !p.OK {
		t.Fatalf("b2: %+v", p)
	}
	left(ref, "", r.clock.Now())
	unanswered(t, "a at +2s", a)
	r.advance(ref, 30*time.Second) // a granted at +3s, everything full by +6s
	if p := answer(a); !p.OK {
		t.Fatalf("a: %+v", p)
	}
	if n := keys(ref); n != 0 {
		t.Fatalf("%d keys long after, want 0", n)
	}

	// A waiter keeps its key; withdrawing it lets the key go.
	now := r.clock.Now()
	ask(ref, "c", now, 3)
	c := park(ref, "c", now, 3, 0)
	left(ref, "", now)
	ref.Send(&Withdraw{Allow: c})
	if p := answer(c); !errors.Is(p.Err, ErrCancelled) {
		t.Fatalf("c: %+v", p)
	}
	ref.Send(&Withdraw{Allow: c})
	r.advance(ref, 10*time.Second)
	unanswered(t, "c withdrawn twice", c)
	if n := keys(ref); n != 0 {
		t.Fatalf("%d keys after the withdrawn waiter, want 0", n)
	}
}

// TestKeyedStingy: a bucket that earns nothing keeps a key that has taken,
// since forgetting it would hand its burst back.
func TestKeyedStingy(t *testing.T) {
	r := newHarness(t)
	ref, err := SpawnKeyedBucket(r.e, "", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	ask(ref, "k", r.t0, 1)
	r.clock.Advance(time.Hour)
	if p := ask(ref, "k", r.at(time.Hour), 1); p.OK {
		t.Fatal("a stingy key got its token back")
	}
	if n := keys(ref); n != 1 {
		t.Fatalf("%d keys, want 1", n)
	}
	if _, err := SpawnKeyedBucket(nil, "", 1, 1); err == nil {
		t.Fatal("SpawnKeyedBucket(nil engine): no error")
	}
	if _, err := SpawnKeyedWindow(nil, "", 1, time.Second); err == nil {
		t.Fatal("SpawnKeyedWindow(nil engine): no error")
	}
}

func TestKeyedAllocs(t *testing.T) {
	r := newHarness(t)
	ref, _ := SpawnKeyedBucket(r.e, "", 1e9, 1)
	a := &Allow{Now: r.t0, Key: "hot", N: 1, Reply: make(chan Permit, 1)}
	got := testing.AllocsPerRun(1000, func() {
		a.Now += int64(time.Second)
		ref.Send(a)
		<-a.Reply
	})
	if got != 0 {
		t.Errorf("%v allocations an Allow on a known key, want 0", got)
	}
}

// TestKeyedZeroSeed: a keyed bucket given the zero maphash.Seed, which
// maphash refuses, hashes its keys with a seed of its own and lends
// nothing, rather than stop at its first Allow.
func TestKeyedZeroSeed(t *testing.T) {
	r := newHarness(t)
	for _, burst := range []float64{1, 100} {
		ref, hot, err := SpawnKeyedBucketCredit(r.e, "", 1, burst, maphash.Seed{})
		if err != nil {
			t.Fatal(err)
		}
		if hot != nil {
			t.Errorf("burst %v: a Hot for callers who cannot hash", burst)
		}
		if p := ask(ref, "k", r.clock.Now(), 1); !p.OK || p.Err != nil {
			t.Fatalf("burst %v: first Allow %+v, want granted", burst, p)
		}
	}
}

// TestKeyedHotLeaseFollowsTheRate: a hot key of a fast bucket is lent a
// millisecond of its rate at a time, as a Bucket is, so its callers draw
// a million tokens of a billion a second before one of them asks the
// actor; a slow bucket's hot key is lent a sixteenth of its burst.
func TestKeyedHotLeaseFollowsTheRate(t *testing.T) {
	r := newHarness(t)
	for _, tc := range []struct {
		rate, burst float64
		lease       int
	}{
		{1e9, 1e9, 1_000_000},
		{1000, 1e6, 1024},
		{10, 800, 50},
	} {
		ref, hot, err := SpawnKeyedBucketCredit(r.e, "", tc.rate, tc.burst, maphash.MakeSeed())
		if err != nil {
			t.Fatal(err)
		}
		now := r.clock.Now()
		for range hotAsks + 1 {
			if p := ask(ref, "hot", now, 1); !p.OK {
				t.Fatalf("rate %v: ask %+v", tc.rate, p)
			}
		}
		c := newHotCredit(hot, "hot")
		n := 0
		for n <= 2*tc.lease && c.Draw(1) {
			n++
		}
		if n != tc.lease {
			t.Errorf("rate %v, burst %v: drew %d without the actor, want a lease of %d", tc.rate, tc.burst, n, tc.lease)
		}
	}
}
