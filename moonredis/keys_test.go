package moonredis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// scriptKeys is a hook that records, for each script command, how many
// keys it carried, and counts the pipelines of script commands sent.
type scriptKeys struct {
	mu        sync.Mutex
	keys      []int
	pipelines atomic.Int64
}

func (h *scriptKeys) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *scriptKeys) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.note(cmd)
		return next(ctx, cmd)
	}
}
func (h *scriptKeys) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if strings.HasPrefix(c.Name(), "eval") {
				h.pipelines.Add(1)
				break
			}
		}
		for _, c := range cmds {
			h.note(c)
		}
		return next(ctx, cmds)
	}
}

func (h *scriptKeys) note(cmd redis.Cmder) {
	if !strings.HasPrefix(cmd.Name(), "eval") {
		return
	}
	n, _ := cmd.Args()[2].(int)
	h.mu.Lock()
	h.keys = append(h.keys, n)
	h.mu.Unlock()
}

// TestKeysShareARun: through a *redis.Client, the batches of keys that
// wait while every call slot is taken go to Redis in one script run
// carrying every key, not a pipeline of a run per key; each key is
// answered by its own state.
func TestKeysShareARun(t *testing.T) {
	b, release, entered, seen := heldBucket(t, func(c *Config) { c.MaxCalls = 1 }, 1, 2)
	const keys, each = 12, 3
	var allowed [keys]atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		if b.Allow("k0") {
			allowed[0].Add(1)
		}
	})
	recv(t, entered, "the first call held")
	for i := 1; i < keys; i++ {
		for range each {
			wg.Go(func() {
				if b.Allow(fmt.Sprint("k", i)) {
					allowed[i].Add(1)
				}
			})
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
	seen.mu.Lock()
	defer seen.mu.Unlock()
	// The held call, then the other keys in one run (the first try of a
	// script not yet loaded is sent again as EVAL, with the same keys).
	if !slices.Contains(seen.keys, keys-1) || seen.pipelines.Load() != 0 {
		t.Errorf("script commands carried %v keys in %d pipelines: want one run of %d keys, no pipeline", seen.keys, seen.pipelines.Load(), keys-1)
	}
	if st := b.Stats(); st.Calls != 2 {
		t.Errorf("Stats = %+v: want 2 calls", st)
	}
}

// TestRunSentAgainCountsOnce: a run of several keys that reaches Redis
// twice under one name (go-redis sending it again after a lost reply)
// gives the same answers the second time and takes nothing more, for
// every key; a run under another name takes again.
func TestRunSentAgainCountsOnce(t *testing.T) {
	f := newFake(t)
	ctx := context.Background()
	keys := []string{"a", "b", "c"}
	run := func(name string) []any {
		t.Helper()
		// A bucket of 1 a second holding 2: ARGV as the limiter sends
		// them, one Allow for a, two for b, one for c.
		args := []any{"id", name, 1e6, 2, 200, 1, 1, 0, 0, 2, 1, 0, 0, 1, 0, 0, 1, 1, 0, 0}
		v, err := bucketKeys.Run(ctx, f.rdb, keys, args...).Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	first := run("id.1")
	again := run("id.1")
	if want := []any{int64(1), int64(0), int64(1000), int64(1), int64(0), int64(1000), int64(1), int64(0), int64(0), int64(1), int64(0), int64(1000)}; !slices.Equal(first, want) {
		t.Fatalf("first run answered %v, want %v", first, want)
	}
	if !slices.Equal(first, again) {
		t.Errorf("the run sent again answered %v, want %v as the first", again, first)
	}
	next := run("id.2")
	// a and c had one token left, b none.
	if want := []any{int64(1), int64(0), int64(0), int64(0), int64(1000000), int64(0), int64(0), int64(1000000), int64(0), int64(1), int64(0), int64(0)}; !slices.Equal(next, want) {
		t.Errorf("a run under a new name answered %v, want %v: the one sent again took more", next, want)
	}
}

// TestHashSlot: the slot of a key is Redis Cluster's: CRC16 of its hash
// tag if it has one, of the whole key if not, modulo 16384; the prefix
// counts as part of the key.
func TestHashSlot(t *testing.T) {
	for _, c := range []struct {
		prefix, key string
		want        uint16
	}{
		{"", "123456789", 0x31C3}, // the CRC16/XMODEM check value
		{"", "foo", 12182},
		{"fo", "o", 12182},
		{"", "bar", 5061},
		{"", "hello", 866},
		{"moonredis:bucket:", "{foo}:k", 12182}, // the tag only
		{"x{fo", "o}y", 12182},                  // a tag across prefix and key
	} {
		if got := hashSlot(c.prefix, c.key); got != c.want {
			t.Errorf("hashSlot(%q, %q) = %d, want %d", c.prefix, c.key, got, c.want)
		}
	}
	// The first '{' opens the tag: an empty one, or one never closed,
	// leaves the whole key to be hashed.
	for _, k := range []string{"a{}{foo}", "{foo", "x{foo"} {
		if hashSlot("", k) == 12182 {
			t.Errorf("hashSlot(%q) took foo as its tag", k)
		}
	}
}

// TestRunsBySlot: through a cluster client, a flight of several keys
// goes as one run per hash slot, each run's keys of one slot, every key
// in exactly one run; through a single server, as one run; through any
// other client, as a run per key.
func TestRunsBySlot(t *testing.T) {
	keys := []string{"{a}1", "{b}1", "{a}2", "{c}1", "{b}2", "{a}3"}
	for _, c := range []struct {
		spread int
		runs   int
	}{{oneRun, 1}, {perRun, len(keys)}, {perSlot, 3}} {
		l := &limiter{spread: c.spread, script: bucketScript, keys: bucketKeys, idArgs: []any{"id"}}
		l.cfg.Prefix = "p:"
		ready := slices.Clone(keys)
		if c.spread == perSlot {
			l.bySlot(ready)
		}
		f := &flight{parts: make([]part, len(ready))}
		for i, k := range ready {
			p := &f.parts[i]
			p.key, p.one[0] = k, &ask{key: k, n: 1}
			p.batch = p.one[:]
		}
		l.plan(f)
		if len(f.runs) != c.runs {
			t.Errorf("spread %d: %d runs, want %d", c.spread, len(f.runs), c.runs)
		}
		var got []string
		for _, r := range f.runs {
			slot := hashSlot("", r.keys[0])
			for _, k := range r.keys {
				if c.spread == perSlot && hashSlot("", k) != slot {
					t.Errorf("run %v mixes slots", r.keys)
				}
				got = append(got, strings.TrimPrefix(k, "p:"))
			}
			if n := r.to - r.from; len(r.keys) != n || (n > 1) != (l.scriptOf(&r) == bucketKeys) {
				t.Errorf("run of %d keys %v: wrong keys or script", n, r.keys)
			}
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(keys))
		if !slices.Equal(got, want) {
			t.Errorf("spread %d: runs carry %v, want each of %v once", c.spread, got, want)
		}
	}
}

// TestMaxCallsDefault: MaxCalls left at zero is 4, or the client's pool
// if that is smaller; a value set is kept, up to 64.
func TestMaxCallsDefault(t *testing.T) {
	small := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", PoolSize: 2})
	big := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", PoolSize: 100})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, PoolSize: 3})
	defer small.Close()
	defer big.Close()
	defer ring.Close()
	for _, c := range []struct {
		client redis.UniversalClient
		set    int
		want   int
	}{{small, 0, 2}, {big, 0, 4}, {ring, 0, 3}, {big, 50, 50}, {small, 7, 7}, {big, 100, 64}} {
		cfg, err := Config{Client: c.client, MaxCalls: c.set}.normal("bucket")
		if err != nil {
			t.Fatal(err)
		}
		if cfg.MaxCalls != c.want {
			t.Errorf("MaxCalls %d with a pool of %d: %d, want %d", c.set, poolSize(c.client), cfg.MaxCalls, c.want)
		}
	}
}

// TestReadRefusesMisshapenAnswers: an answer with too few or too many
// numbers or keys, or of a type no script sends, fails every key of its
// run with an error rather than answering some keys from others'.
func TestReadRefusesMisshapenAnswers(t *testing.T) {
	two := func() []part {
		ps := make([]part, 2)
		for i := range ps {
			ps[i].one[0] = &ask{n: 1}
			ps[i].batch = ps[i].one[:]
		}
		return ps
	}
	for _, v := range []any{
		[]any{int64(1), int64(0), int64(0)},
		[]any{int64(1), int64(0), int64(0), int64(1), int64(0), int64(0), int64(1)},
		[]any{int64(1), int64(0), "x", int64(1), int64(0), int64(0)},
		"1,0,0",
		"1,0,0/1,0,0/1,0,0",
		int64(3),
	} {
		ps := two()
		read(ps, v, nil)
		if ps[0].err == nil || ps[1].err == nil {
			t.Errorf("answer %#v: errors %v and %v, want both failed", v, ps[0].err, ps[1].err)
		}
	}
	ps := two()
	read(ps, []any{int64(1), int64(0), int64(5000), int64(0), int64(7), int64(0)}, nil)
	if ps[0].err != nil || ps[1].err != nil || !ps[0].out[0].ok || ps[1].out[0].ok || ps[0].out[0].left != 5 || ps[1].out[0].wait != 7e3 {
		t.Errorf("a well-formed answer read as %+v and %+v", ps[0], ps[1])
	}
}

// TestExpiryKnownAndNeverShortened: a bucket's write notes in field e an
// instant its key lives to, and reads the expiry again only when it needs
// more. An expiry another writer set further out, with no e of its own,
// is read and kept, never shortened, and becomes e.
func TestExpiryKnownAndNeverShortened(t *testing.T) {
	f := newFake(t)
	b, err := NewBucket(f.eng, f.cfg(), 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	key := "moonredis:bucket:k"
	if !b.Allow("k") {
		t.Fatal("a full bucket refused")
	}
	e := func() int64 {
		t.Helper()
		v, err := f.rdb.HGet(context.Background(), key, "e").Int64()
		if err != nil {
			t.Fatalf("field e: %v", err)
		}
		return v
	}
	lives := func() int64 { return f.clock.Now()/1e6 + f.mr.TTL(key).Milliseconds() }
	if got, want := e(), lives(); got != want {
		t.Errorf("after the first write e = %d, the key lives to %d", got, want)
	}
	// Another writer, keeping no e, lengthens the expiry to an hour.
	f.rdb.HDel(context.Background(), key, "e")
	f.rdb.PExpire(context.Background(), key, time.Hour)
	long := lives()
	if !b.Allow("k") {
		t.Fatal("a bucket of 10 refused its second")
	}
	if got := lives(); got != long {
		t.Errorf("the write moved an expiry an hour out to %d, want %d kept", got, long)
	}
	if got := e(); got != long {
		t.Errorf("e = %d after reading an expiry of %d", got, long)
	}
}

// TestKeysGoWhileCallsAreFree: a request for another key goes at once
// while fewer than MaxCalls calls are out. While every call is out,
// requests wait for one to land, and then go together, MaxKeys keys a
// call.
func TestKeysGoWhileCallsAreFree(t *testing.T) {
	f := newFake(t)
	for _, sc := range []*redis.Script{bucketScript, bucketKeys} { // so none is sent twice
		if err := sc.Load(context.Background(), f.rdb).Err(); err != nil {
			t.Fatal(err)
		}
	}
	seen := new(scriptKeys)
	f.rdb.AddHook(seen)
	release := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var held atomic.Int64
	f.rdb.AddHook(hook{process: func(next redis.ProcessHook) redis.ProcessHook {
		return func(ctx context.Context, cmd redis.Cmder) error {
			if !strings.HasPrefix(cmd.Name(), "eval") {
				return next(ctx, cmd)
			}
			if n := held.Add(1); n <= 2 {
				select { // each of the first two calls waits for its release
				case <-release[n-1]:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return next(ctx, cmd)
		}
	}})
	cfg := f.cfg()
	cfg.MaxCalls, cfg.MaxKeys = 2, 3
	b, err := NewBucket(f.eng, cfg, 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var allowed atomic.Int64
	allow := func(key string) {
		wg.Go(func() {
			if b.Allow(key) {
				allowed.Add(1)
			}
		})
	}
	keys := func() []int {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		return slices.Clone(seen.keys)
	}
	allow("k0")
	waitFor(t, "the first call", func() bool { return held.Load() == 1 })
	allow("k1") // a call to spare: it goes at once, beside the first
	waitFor(t, "a second call while the first is out", func() bool { return held.Load() == 2 })
	for _, k := range []string{"k2", "k3", "k4", "k5"} {
		allow(k)
	}
	waitFor(t, "four callers behind the two calls", func() bool { return b.l.asked.Load() == 6 })
	if got := keys(); !slices.Equal(got, []int{1, 1}) {
		t.Fatalf("script runs of %v keys with both calls out, want [1 1]: the rest wait", got)
	}
	// The first call landing lets three of the four go together, beside
	// the second call; the fourth goes when those three land.
	close(release[0])
	waitFor(t, "runs of [1 1 3 1] keys", func() bool { return slices.Equal(keys(), []int{1, 1, 3, 1}) })
	close(release[1])
	waitGroup(t, &wg, "callers of six keys")
	if got := keys(); !slices.Equal(got, []int{1, 1, 3, 1}) {
		t.Errorf("script runs of %v keys, want [1 1 3 1]", got)
	}
	if st := b.Stats(); st.Calls != 4 || allowed.Load() != 6 {
		t.Errorf("Stats = %+v, %d let through: want 4 calls letting all 6 through", st, allowed.Load())
	}
}

// TestKeyInSeveralCalls: requests for a key that has a call out go at
// once in a call of their own while a call is to spare, each call under
// its own slot of the limiter's id. A Wait goes only once no call
// carries its key, and nothing goes beside it, so waiters keep their
// order.
func TestKeyInSeveralCalls(t *testing.T) {
	f := newFake(t)
	var mu sync.Mutex
	var names []string // ARGV[1] of each script run, in order
	f.rdb.AddHook(hook{process: func(next redis.ProcessHook) redis.ProcessHook {
		return func(ctx context.Context, cmd redis.Cmder) error {
			if cmd.Name() == "evalsha" {
				mu.Lock()
				names = append(names, fmt.Sprint(cmd.Args()[4]))
				mu.Unlock()
			}
			return next(ctx, cmd)
		}
	}})
	release := make(chan struct{})
	h, entered := holdFirst(release)
	f.rdb.AddHook(h)
	b, err := NewBucket(f.eng, f.cfg(), 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan bool, 1)
	go func() { first <- b.Allow("hot") }()
	recv(t, entered, "the first call held")
	for i := range 2 {
		if !b.Allow("hot") {
			t.Fatalf("Allow %d beside the held call refused", i+1)
		}
	}
	mu.Lock()
	got := slices.Clone(names)
	mu.Unlock()
	if len(got) != 3 || got[0] != b.l.id || got[1] != b.l.id+"#1" || got[2] != b.l.id+"#1" {
		t.Errorf("runs under %q, want the held call under the id and the two beside it under slot 1", got)
	}
	waited := make(chan error, 1)
	go func() { waited <- b.Wait(context.Background(), "hot") }()
	waitFor(t, "the Wait at the actor", func() bool { return b.l.asked.Load() == 4 })
	if st := b.Stats(); st.Calls != 3 {
		t.Fatalf("%d calls with the Wait in hand, want 3: it waits for the held call", st.Calls)
	}
	close(release)
	if !recv(t, first, "the held Allow") {
		t.Error("the held Allow was refused")
	}
	if err := recv(t, waited, "the Wait"); err != nil {
		t.Errorf("Wait = %v, want a token", err)
	}
	if st := b.Stats(); st.Calls != 4 || st.Admitted != 4 {
		t.Errorf("Stats = %+v, want 4 calls letting 4 through", st)
	}
}

// TestSlotsKeepBatchesApart: a batch sent again is answered from what its
// own run kept, though another batch for the key ran in between under
// another slot; it takes nothing more.
func TestSlotsKeepBatchesApart(t *testing.T) {
	f := newFake(t)
	ctx := context.Background()
	run := func(slot, name string) []any {
		t.Helper()
		// A bucket of 1 a second holding 2, one Allow.
		v, err := bucketScript.Run(ctx, f.rdb, []string{"k"}, slot, name, 1e6, 2, 200, 1, 0, 0).Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	first := run("id", "id.1")
	beside := run("id#1", "id.2") // the key's second call, out at once
	again := run("id", "id.1")    // the first, sent again
	if want := []any{int64(1), int64(0), int64(1000)}; !slices.Equal(first, want) {
		t.Fatalf("first run answered %v, want %v", first, want)
	}
	if want := []any{int64(1), int64(0), int64(0)}; !slices.Equal(beside, want) {
		t.Fatalf("the run beside it answered %v, want %v", beside, want)
	}
	if !slices.Equal(again, first) {
		t.Errorf("the run sent again answered %v, want %v as the first", again, first)
	}
	if next := run("id", "id.3"); next[0] != int64(0) {
		t.Errorf("a new run answered %v, want a refusal: the bucket's two tokens were taken once each", next)
	}
}

// heldBucket is a bucket of rate and burst on a fake Redis, its Config
// changed by set, whose first call is held until release is closed:
// entered says it has begun. seen counts the keys of every script run.
func heldBucket(t *testing.T, set func(*Config), rate, burst float64) (b *Bucket, release chan struct{}, entered chan struct{}, seen *scriptKeys) {
	t.Helper()
	f := newFake(t)
	release = make(chan struct{})
	h, entered := holdFirst(release)
	f.rdb.AddHook(h)
	seen = new(scriptKeys)
	f.rdb.AddHook(seen)
	cfg := f.cfg()
	set(&cfg)
	b, err := NewBucket(f.eng, cfg, rate, burst)
	if err != nil {
		t.Fatal(err)
	}
	return b, release, entered, seen
}
