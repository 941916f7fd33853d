package client

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/actors"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// TestKeyedBucketIndependent: each key has its own tokens and its own line;
// one key spent and waited on changes nothing for another.
func TestKeyedBucketIndependent(t *testing.T) {
	r := newLimitRig(t)
	k, err := NewKeyedBucket(r.eng, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		key  string
		want bool
	}{
		{"a", true}, {"a", true}, {"a", false}, // a's burst is spent
		{"b", true}, {"b", true}, {"b", false}, // b had its own
		{"c", true},
	}
	for i, s := range steps {
		if got := k.Allow(s.key); got != s.want {
			t.Fatalf("step %d: Allow(%q) = %v, want %v", i, s.key, got, s.want)
		}
	}
	if d := k.Delay("a"); d != time.Second {
		t.Fatalf("Delay(a) = %v, want 1s", d)
	}
	if d, tok := k.Delay("unseen"), k.Tokens("unseen"); d != 0 || tok != 2 {
		t.Fatalf("unseen key: Delay %v Tokens %v, want 0 and the burst", d, tok)
	}

	// a waiter on a does not hold up c, nor is it served by c's tokens.
	a := waitAsync(r.ctx, func(ctx context.Context) error { return k.Wait(ctx, "a") })
	r.awaitParked(&k.l, "a", 1)
	if err := k.Wait(r.ctx, "c"); err != nil {
		t.Fatalf("Wait(c) behind a's waiter: %v", err)
	}
	if r.parked(&k.l, "c") != 0 {
		t.Fatal("c has a line of its own making")
	}
	r.to(time.Second)
	if err := r.result(a, "Wait(a)"); err != nil {
		t.Fatalf("Wait(a) = %v", err)
	}
	if !k.Allow("b") {
		t.Fatal("b's token earned at +1s went elsewhere")
	}

	// Cancelling one key's waiter leaves the others' alone.
	ctxA, cancelA := context.WithCancel(r.ctx)
	a = waitAsync(ctxA, func(ctx context.Context) error { return k.Wait(ctx, "a") })
	r.awaitParked(&k.l, "a", 1)
	b := waitAsync(r.ctx, func(ctx context.Context) error { return k.Wait(ctx, "b") })
	r.awaitParked(&k.l, "b", 1)
	cancelA()
	if err := r.result(a, "cancelled Wait(a)"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait(a) = %v", err)
	}
	// The actor has taken a's waiter out, and set its timer for b's,
	// before the clock moves: a timer set after the move would wait for
	// the next one.
	r.awaitParked(&k.l, "a", 0)
	r.to(2 * time.Second)
	if err := r.result(b, "Wait(b)"); err != nil {
		t.Fatalf("Wait(b) = %v", err)
	}
	if !k.Allow("a") {
		t.Fatal("the token a's withdrawn waiter did not take is gone")
	}

	if err := k.Close(r.ctx); err != nil {
		t.Fatal(err)
	}
	if k.Allow("z") || k.Delay("z") != policy.Never || !errors.Is(k.Wait(r.ctx, "z"), ErrClosed) {
		t.Fatal("a closed keyed bucket still answers")
	}
}

// TestKeyedWindowIndependent: each key's quota counts its own events, and
// a thousand keys each get their full quota.
func TestKeyedWindowIndependent(t *testing.T) {
	r := newLimitRig(t)
	const allow = 3
	k, err := NewKeyedWindow(r.eng, allow, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for key := range 1000 {
		name := fmt.Sprint("client-", key)
		for i := range allow {
			if !k.Allow(name) {
				t.Fatalf("key %s: event %d refused within its quota", name, i)
			}
		}
		if k.Allow(name) {
			t.Fatalf("key %s: event %d allowed past its quota", name, allow)
		}
		if k.Left(name) != 0 {
			t.Fatalf("key %s: Left = %d after its quota", name, k.Left(name))
		}
	}
	if got := k.Left("fresh"); got != allow {
		t.Fatalf("Left(fresh) = %d, want %d", got, allow)
	}
	if d := k.Delay("client-0"); d <= 0 || d > time.Minute {
		t.Fatalf("Delay(client-0) = %v, want up to a minute", d)
	}
	short, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.Wait(short, "client-0"); !errors.Is(err, ErrExceedsDeadline) {
		t.Fatalf("Wait(client-0) with 30s left for a minute = %v", err)
	}
	if err := k.Wait(short, "client-fresh"); err != nil {
		t.Fatalf("Wait(client-fresh) = %v", err)
	}
}

// TestKeyedWindowWait: a waiter on one key is served when that key's
// oldest event leaves its window, while other keys go on unhindered.
func TestKeyedWindowWait(t *testing.T) {
	r := newLimitRig(t)
	k, err := NewKeyedWindow(r.eng, 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !k.Allow("k") {
		t.Fatal("step 0: a fresh key refused")
	}
	w := waitAsync(context.Background(), func(ctx context.Context) error { return k.Wait(ctx, "k") })
	r.awaitParked(&k.l, "k", 1)
	if !k.Allow("j") || k.Allow("j") {
		t.Fatal("step 1: key j is not on its own quota")
	}
	r.to(time.Minute - 1)
	if got := r.parked(&k.l, "k"); got != 1 {
		t.Fatalf("step 2: a nanosecond before k's event leaves, k's line holds %d, want the waiter still in it", got)
	}
	r.to(time.Minute)
	if err := r.result(w, "Wait(k)"); err != nil {
		t.Fatalf("step 3: Wait(k) = %v", err)
	}
	if k.Left("k") != 0 || k.Left("j") != 1 {
		t.Fatalf("step 4: Left(k) %d, Left(j) %d; want 0 (the waiter's event) and 1", k.Left("k"), k.Left("j"))
	}
}

// TestKeyedShards: a keyed limiter spreads its keys over several actors,
// one owner a key. Retuning reaches the keys of every actor, a key whose
// actor is gone is refused while the others still answer, and Close stops
// them all.
func TestKeyedShards(t *testing.T) {
	r := newLimitRig(t)
	k, err := NewKeyedBucket(r.eng, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(k.l.shards), shardsFor(runtime.GOMAXPROCS(0)); got != want || got < 2 {
		t.Fatalf("%d actors, want %d (at least 2)", got, want)
	}
	// One key on each actor.
	keys := make([]string, len(k.l.shards))
	for i, found := 0, 0; found < len(keys); i++ {
		key := fmt.Sprint("key-", i)
		for s, ref := range k.l.shards {
			if k.l.to(key) == ref && keys[s] == "" {
				keys[s] = key
				found++
			}
		}
	}

	if err := k.SetBurst(1); err != nil {
		t.Fatal(err)
	}
	for s, key := range keys {
		if !k.Allow(key) || k.Allow(key) {
			t.Fatalf("actor %d: key %q does not hold the burst of 1 SetBurst gave every key", s, key)
		}
	}

	// The first actor stops on its own: its keys are refused, the rest
	// still answer.
	if err := k.l.shards[0].Stop(r.ctx); err != nil {
		t.Fatal(err)
	}
	fresh := map[bool]string{} // a key never asked for, on the stopped actor and on another
	for i := 0; len(fresh) < 2; i++ {
		key := fmt.Sprint("fresh-", i)
		if on := k.l.to(key) == k.l.shards[0]; fresh[on] == "" {
			fresh[on] = key
		}
	}
	if k.Allow(fresh[true]) {
		t.Fatal("a key of a stopped actor was let through")
	}
	if !k.Allow(fresh[false]) {
		t.Fatal("a key of a running actor is refused with another actor stopped")
	}

	if err := k.Close(r.ctx); err != nil {
		t.Fatal(err)
	}
	for s, ref := range k.l.shards {
		if !ref.Stopped() {
			t.Fatalf("actor %d still runs after Close", s)
		}
	}
}

// TestKeyedShardsRefused: when the engine refuses one of a keyed limiter's
// actors, the constructor returns the error and stops those it started.
func TestKeyedShardsRefused(t *testing.T) {
	r := newLimitRig(t)
	var started []*engine.Ref
	var l limiter
	err := l.spawnShards(r.eng, func() (*engine.Ref, error) {
		if len(started) == 2 {
			return nil, errors.New("refused")
		}
		ref, err := actors.SpawnKeyedBucket(r.eng, "", 1, 1)
		if err == nil {
			started = append(started, ref)
		}
		return ref, err
	})
	if err == nil || l.shards != nil {
		t.Fatalf("spawnShards = %v with %d actors kept, want the refusal and none", err, len(l.shards))
	}
	for i, ref := range started {
		if !ref.Stopped() {
			t.Fatalf("actor %d of those started before the refusal still runs", i)
		}
	}
	if _, err := NewKeyedWindow(nil, 1, time.Second); err == nil {
		t.Fatal("NewKeyedWindow(nil) built a window")
	}
}

// TestShardsFor: four actors a processor, a power of two, at most 64.
func TestShardsFor(t *testing.T) {
	for _, c := range []struct{ procs, want int }{{0, 1}, {1, 4}, {2, 8}, {3, 16}, {16, 64}, {17, 64}, {256, 64}} {
		if got := shardsFor(c.procs); got != c.want {
			t.Errorf("shardsFor(%d) = %d, want %d", c.procs, got, c.want)
		}
	}
}

// TestKeyedCreditYields: a hot key's lent tokens never let an Allow past a
// caller waiting on the key, and a retune takes them back first, so a
// lower burst holds at once.
func TestKeyedCreditYields(t *testing.T) {
	r := newLimitRig(t)
	k, err := NewKeyedBucket(r.eng, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	for range 97 { // hot after 32 asks at one instant; three tokens left
		if !k.Allow("hot") {
			t.Fatal("refused within the burst")
		}
	}
	if HotDrawn(k) == 0 {
		t.Fatal("the key never drew from lent tokens")
	}
	w := waitAsync(r.ctx, func(ctx context.Context) error { return k.WaitN(ctx, "hot", 5) })
	r.awaitParked(&k.l, "hot", 1)
	if k.Allow("hot") {
		t.Fatal("an Allow overtook the caller waiting for five tokens")
	}
	r.to(2 * time.Second)
	if err := r.result(w, "WaitN(hot, 5)"); err != nil {
		t.Fatalf("WaitN(hot, 5) = %v", err)
	}

	// Hot again, with tokens lent; then a burst of one.
	r.to(200 * time.Second)
	for range 40 {
		k.Allow("hot")
	}
	if err := k.SetBurst(1); err != nil {
		t.Fatal(err)
	}
	got := allowed(k, "hot", 100)
	if got > 1 {
		t.Fatalf("%d let through at once after SetBurst(1)", got)
	}
}

// TestKeyedCreditCompact: a hot key keeps its lent tokens, and its books,
// when its actor compacts its keys after forgetting thousands; a retune
// then finds it where it moved.
func TestKeyedCreditCompact(t *testing.T) {
	r := newLimitRig(t)
	k, err := NewKeyedBucket(r.eng, 1000, 100)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20000 {
		k.Allow(fmt.Sprint("cold-", i))
	}
	for range 40 { // hot, its entry far along its actor's slice
		k.Allow("hot")
	}
	r.to(20 * time.Millisecond)             // the cold keys full: forgotten, the slices compacted
	if err := k.SetBurst(100); err != nil { // takes back and lends to every hot key, where it now is
		t.Fatal(err)
	}
	r.to(time.Second)
	for range 40 {
		k.Allow("hot")
	}
	r.to(2 * time.Second)
	got := allowed(k, "hot", 300)
	if got != 100 {
		t.Fatalf("%d let through from a full bucket of 100 after compacting", got)
	}
	if HotDrawn(k) == 0 {
		t.Fatal("the key never drew from lent tokens")
	}
}

// TestKeyedCreditSweep: the sweep that finds a hot key's bucket full in
// its books takes back what was drawn first, so the key is kept, not
// forgotten and made full again; and Tokens counts what was drawn.
func TestKeyedCreditSweep(t *testing.T) {
	r := newLimitRig(t)
	k, err := NewKeyedBucket(r.eng, 1000, 100)
	if err != nil {
		t.Fatal(err)
	}
	shadow := policy.NewBucket(1000, 100, r.clock.Now())
	allow := func() {
		if k.Allow("hot") && !shadow.Take(r.clock.Now(), 1) {
			t.Fatal("let through more than the bucket allows")
		}
	}
	for range 33 { // made by the first ask, hot at the 33rd, lent 6
		allow()
	}
	r.to(45 * time.Millisecond) // full in its books at +33ms: the sweep looks at +45.5ms
	for range 6 {
		allow()
	}
	if d := HotDrawn(k); d != 6 {
		t.Fatalf("%d drawn from lent tokens, want 6", d)
	}
	r.to(46 * time.Millisecond)
	for range 200 {
		allow()
	}

	k, err = NewKeyedBucket(r.eng, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	for range 39 { // 33 asked, 6 drawn
		k.Allow("hot")
	}
	if tok := k.Tokens("hot"); tok != 61 {
		t.Fatalf("Tokens = %v after 39 taken of 100, want 61", tok)
	}
}

// TestKeyedCreditMakesRoom: four hot keys whose buckets never refill, spent,
// hold every place; a fifth key turning hot takes the place of one that
// drew nothing, and is lent to.
func TestKeyedCreditMakesRoom(t *testing.T) {
	r := newLimitRig(t)
	k, err := NewKeyedBucket(r.eng, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	// Five keys on one actor.
	var keys []string
	for i := 0; len(keys) < 5; i++ {
		key := fmt.Sprint("key-", i)
		if k.l.to(key) == k.l.shards[0] {
			keys = append(keys, key)
		}
	}
	for _, key := range keys[:4] {
		for range 200 { // hot, then spent: nothing more to lend
			k.Allow(key)
		}
	}
	before := HotDrawn(k)
	for range 100 {
		k.Allow(keys[4])
	}
	if HotDrawn(k) == before {
		t.Fatal("a key turning hot found no place among keys that draw nothing")
	}
}

// allowed is how many of n Allows of key k lets through.
func allowed(k *KeyedBucket, key string, n int) int {
	got := 0
	for range n {
		if k.Allow(key) {
			got++
		}
	}
	return got
}
