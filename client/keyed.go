package client

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"runtime"
	"time"

	"github.com/moonpool-go/moonpool/actors"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// KeyedBucket is a token bucket per key — per API key, per client address
// — kept by a few actors on an engine, each key by one of them (picked by
// its hash: four actors a processor, at most 64), so callers of different
// keys on different processors are served at once while each key still
// has one owner. Keys are independent: each has its own tokens and its own
// line of waiters, and each answers as a Bucket does. A key is made full
// when first seen and forgotten once it is full again with nobody waiting,
// so memory follows the keys in use, not every key ever seen (see
// actors.SpawnKeyedBucket).
//
// It is safe for concurrent use. Build one with NewKeyedBucket; the zero
// KeyedBucket is not usable.
type KeyedBucket struct {
	l    limiter
	hot  []*actors.Hot // each shard's hot keys; nil ones for a burst under 16
	nums bucketNumbers
}

// NewKeyedBucket starts a keyed bucket on eng: each key earns rate tokens a
// second up to burst, read as NewBucket reads them. It returns an error if
// eng is nil or refuses one of its actors.
func NewKeyedBucket(eng *Engine, rate, burst float64) (*KeyedBucket, error) {
	if eng == nil {
		return nil, errors.New("moonpool: NewKeyedBucket: nil engine")
	}
	k := &KeyedBucket{l: limiter{by: "the key's bucket"}}
	err := k.l.spawnShards(eng, func() (*engine.Ref, error) {
		ref, hot, err := actors.SpawnKeyedBucketCredit(eng, "", rate, burst, k.l.seed)
		k.hot = append(k.hot, hot)
		return ref, err
	})
	if err != nil {
		return nil, fmt.Errorf("moonpool: NewKeyedBucket: %w", err)
	}
	if !(rate > 0) {
		rate = 0
	}
	k.nums.rate.Store(rate)
	k.nums.burst.Store(policy.NewBucket(rate, burst, 0).Tokens(0))
	return k, nil
}

// Allow is whether key has a token now, taking it if so, as Bucket.Allow.
// It never blocks.
//
// A key the callers ask for much more often than the rest (see
// actors.Hot) is lent tokens ahead of time, as a Bucket is, and Allow
// draws from them with one atomic operation; every other key asks its
// actor. Either way no key lets through more than its exact bucket would
// over any stretch of time, and a hot key may let through up to a lent
// batch fewer after a quiet spell, as Bucket.Allow says.
func (k *KeyedBucket) Allow(key string) bool { return k.AllowN(key, 1) }

// AllowN is Allow for n of key's tokens, answering as Bucket.AllowN: a
// whole n is drawn from a hot key's lent tokens when they hold that many.
func (k *KeyedBucket) AllowN(key string, n float64) bool {
	h := k.l.hash(key)
	s := k.l.shard(h)
	if n >= 1 && n <= 1<<32 && n == math.Trunc(n) && !k.l.closed.Load() && k.hot[s].Draw(h, key, int64(n)) {
		return true // counted by the credit itself: see Stats
	}
	p, _ := k.l.askRef(k.l.shards[s], k.l.eng.Now(), key, n)
	return p.OK
}

// TryN is Try for n of key's tokens, as Bucket.TryN.
func (k *KeyedBucket) TryN(key string, n float64) Decision { return k.l.try(key, n) }

// WaitN is Wait for n of key's tokens, answering as Bucket.WaitN: n above
// the burst is ErrExceedsBurst at once.
func (k *KeyedBucket) WaitN(ctx context.Context, key string, n float64) error {
	if burst := k.nums.burst.Load(); !(n <= burst) {
		k.l.counts.refused.Add(1)
		return fmt.Errorf("%w: %v tokens, burst %v", ErrExceedsBurst, n, burst)
	}
	return k.l.wait(ctx, key, n)
}

// Try is Allow with the whole answer for key (see Decision), from one turn
// of the actor, as Bucket.Try.
func (k *KeyedBucket) Try(key string) Decision { return k.l.try(key, 1) }

// Wait blocks until a token of key's is taken for the caller, in line
// behind key's other waiters (and nobody else's), or ctx is done. It
// answers as Bucket.WaitN does.
func (k *KeyedBucket) Wait(ctx context.Context, key string) error { return k.l.wait(ctx, key, 1) }

// Delay is how long a caller wanting one of key's tokens would wait now, as
// Bucket.Delay. A key not seen yet has its burst, so 0. For a Retry-After
// header use Try.
func (k *KeyedBucket) Delay(key string) time.Duration {
	p, ok := k.l.left(key)
	if !ok {
		return policy.Never
	}
	return p.After
}

// Tokens is how many tokens key holds now: the burst for a key not seen
// yet, 0 after Close.
func (k *KeyedBucket) Tokens(key string) float64 {
	p, _ := k.l.left(key)
	return p.Left
}

// Close stops the actors, as Bucket.Close does, for every key at once.
func (k *KeyedBucket) Close(ctx context.Context) error { return k.l.close(ctx) }

// KeyedWindow is a sliding-window quota per key, each key kept by one of a
// few actors as KeyedBucket's are: at most allow events for each key in
// any stretch window long. Keys are independent and answer as a Window
// does; a key is forgotten once its window is empty with nobody waiting.
//
// It is safe for concurrent use. Build one with NewKeyedWindow; the zero
// KeyedWindow is not usable.
type KeyedWindow struct {
	l    limiter
	nums windowNumbers
}

// NewKeyedWindow starts a keyed window quota on eng, allow events per key
// per window, read as NewWindow reads them. It returns an error if eng is
// nil or refuses one of its actors.
func NewKeyedWindow(eng *Engine, allow int, window time.Duration) (*KeyedWindow, error) {
	if eng == nil {
		return nil, errors.New("moonpool: NewKeyedWindow: nil engine")
	}
	k := &KeyedWindow{l: limiter{by: "the key's window"}}
	err := k.l.spawnShards(eng, func() (*engine.Ref, error) { return actors.SpawnKeyedWindow(eng, "", allow, window) })
	if err != nil {
		return nil, fmt.Errorf("moonpool: NewKeyedWindow: %w", err)
	}
	k.nums.allow.Store(int64(allow))
	k.nums.window = window
	return k, nil
}

// Allow is whether an event for key fits its quota now, counting it if so.
func (k *KeyedWindow) Allow(key string) bool { return k.l.allow(key, 1) }

// Try is Allow with the whole answer for key (see Decision), from one turn
// of the actor, as Bucket.Try.
func (k *KeyedWindow) Try(key string) Decision { return k.l.try(key, 1) }

// Wait blocks until an event for key is counted for the caller, in line
// behind key's other waiters, or ctx is done. It answers as Window.Wait.
func (k *KeyedWindow) Wait(ctx context.Context, key string) error { return k.l.wait(ctx, key, 1) }

// Left is how many more events key's quota would count now: allow for a
// key not seen yet, 0 after Close.
func (k *KeyedWindow) Left(key string) int {
	p, _ := k.l.left(key)
	return int(p.Left)
}

// Delay is how long a caller would wait now for room in key's quota, as
// Window.Delay. For a Retry-After header use Try.
func (k *KeyedWindow) Delay(key string) time.Duration {
	p, ok := k.l.left(key)
	if !ok {
		return policy.Never
	}
	return p.After
}

// Close stops the actors, as Bucket.Close does, for every key at once.
func (k *KeyedWindow) Close(ctx context.Context) error { return k.l.close(ctx) }

// spawnShards starts a keyed limiter's actors on eng with spawn, as many as
// shardsFor says, and stops those it started if one is refused. Each key
// belongs to one of them, picked by its hash, so a key still has one owner
// that takes its requests one at a time, in order, and answers as one
// actor holding every key would; but callers of different keys on
// different processors are served at once instead of in one line.
func (l *limiter) spawnShards(eng *engine.Engine, spawn func() (*engine.Ref, error)) error {
	l.eng, l.seed = eng, maphash.MakeSeed()
	n := shardsFor(runtime.GOMAXPROCS(0))
	for range n {
		ref, err := spawn()
		if err != nil {
			for _, r := range l.shards {
				_ = r.Stop(context.Background())
			}
			l.shards = nil
			return err
		}
		l.shards = append(l.shards, ref)
	}
	return nil
}

// shardsFor is how many actors a keyed limiter spreads its keys over with
// procs processors: four a processor, so two callers running at once
// reach the same actor about one time in 4*procs, rounded up to a power of
// two and at most 64.
func shardsFor(procs int) int {
	n := 1
	for n < 4*procs && n < 64 {
		n <<= 1
	}
	return n
}
