package moonredis

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/policy"
)

// Bucket is a token bucket per key kept in Redis, shared by every process
// that builds one with the same Prefix and numbers: GCRA in one script with
// Redis's clock. It answers as client.KeyedBucket does (see the package
// documentation for where a shared bucket must differ), and each key's
// concurrent requests from this process go to Redis together, in one call.
//
// A key takes one Redis hash (its state, and each limiter's last batch
// and answer). It is kept until its bucket is full again and at least
// twice Config.Timeout past each write (while every process sharing the
// key runs this version: an older one set a key's expiry on every write,
// and may shorten it); idle, it is gone about 2G after that, G being the
// larger of a second and twice the Timeout (the largest among the
// processes sharing the key).
//
// With Config.Lease set, a key this process asks often is leased: its
// tokens are taken from Redis ahead of time and spent here without a
// call (see the package documentation).
//
// It is safe for concurrent use. Build one with NewBucket; the zero Bucket
// is not usable.
type Bucket struct {
	l     limiter
	burst float64
	fb    *bucketLocal // nil unless FailLocal
	ls    *leases      // nil unless Config.Lease
}

// NewBucket starts a bucket on eng whose keys each earn rate tokens a
// second up to burst, full when first seen. A burst <= 0 is a second's
// worth, and one below 1 is 1, as client.NewBucket reads it. A rate that is
// not above zero and finite is refused with an error, as are a burst above
// 1e15 or one that takes more than 31,000 years to fill (their answers
// would not fit the numbers the scripts send back), a nil eng and a Config
// without a Client. It does not touch Redis.
func NewBucket(eng *client.Engine, cfg Config, rate, burst float64) (*Bucket, error) {
	if !(rate > 0) || math.IsInf(rate, 1) {
		return nil, fmt.Errorf("moonredis: NewBucket: rate %v is not above zero and finite", rate)
	}
	cfg, err := cfg.normal("bucket")
	if err != nil {
		return nil, err
	}
	burst = policy.NewBucket(rate, burst, 0).Tokens(0)
	if burst > maxCount || burst*1e6/rate > maxSpan {
		return nil, fmt.Errorf("moonredis: NewBucket: rate %v and burst %v: want a burst of at most %v that fills within %v years",
			rate, burst, maxCount, maxSpan/1e6/3600/24/365)
	}
	b := &Bucket{burst: burst}
	b.l.cfg, b.l.script = cfg, bucketScript
	b.l.a, b.l.b = 1e6/rate, burst // microseconds a token, and the burst
	if err := b.l.start(eng); err != nil {
		return nil, fmt.Errorf("moonredis: NewBucket: %w", err)
	}
	if cfg.FailMode == FailLocal {
		p := float64(cfg.ExpectedProcesses)
		kb, err := client.NewKeyedBucket(eng, rate/p, max(burst/p, 1))
		if err != nil {
			b.l.close(context.Background(), nil)
			return nil, fmt.Errorf("moonredis: NewBucket: %w", err)
		}
		b.fb = &bucketLocal{kb}
	}
	if cfg.Lease > 0 {
		b.ls, err = newLeases(eng, cfg, 1e6/rate, burst, func() bool { return b.l.trips.Load() > b.l.closes.Load() })
		if err != nil {
			b.l.close(context.Background(), b.fb.orNil())
			return nil, fmt.Errorf("moonredis: NewBucket: %w", err)
		}
	}
	return b, nil
}

// Allow is whether key has a token now, taking it if so. It blocks while
// a call to Redis answers it, shared with the other callers of key in this
// process, and behind the call in flight before it: about twice
// Config.Timeout at most (see the package documentation). While callers
// wait for key's tokens, in any process, it says no; after Close it says
// no. Once Redis has refused key, it says no at once, without a call,
// until the wait Redis gave has passed (see the package documentation).
// A leased key answers from its lease without a call while the lease
// holds tokens. When the lease is dry, Allow waits for the lease call in
// flight, or sends one, each at most Config.Timeout, and for at most
// three in a row before it goes to Redis alone.
func (b *Bucket) Allow(key string) bool { return b.TryN(key, 1).OK }

// AllowN is Allow for n tokens. An n <= 0 asks for nothing and gets it
// without asking Redis (until Close); an n above the burst, or NaN, is
// never allowed, and Redis is not asked either.
func (b *Bucket) AllowN(key string, n float64) bool { return b.TryN(key, n).OK }

// Try is Allow with the whole answer for key (see client.Decision).
func (b *Bucket) Try(key string) client.Decision { return b.TryN(key, 1) }

// TryN is Try for n tokens, answering as AllowN does. A whole n of a
// leased key is drawn from the lease when it holds that many; its Left is
// then what the lease still holds. A lease that Redis granted less than
// it asked refuses, once spent, until the wait Redis gave has passed.
// Anything else goes to Redis.
func (b *Bucket) TryN(key string, n float64) client.Decision {
	switch {
	case b.l.closed.Load():
		return client.Decision{Wait: client.Never, Closed: true}
	case n <= 0:
		return client.Decision{OK: true}
	case !(n <= b.burst):
		b.l.stats.refused.Add(1)
		return client.Decision{Wait: client.Never}
	}
	if b.ls != nil && n == math.Trunc(n) && !b.l.heldLocal(b.fb.orNil()) {
		if d, ok := b.ls.take(key, uint64(n)); ok {
			return d
		}
	}
	return b.l.try(key, n, b.fb.orNil())
}

// Wait blocks until a token of key's is taken for the caller, or ctx is
// done. It is WaitN(ctx, key, 1).
func (b *Bucket) Wait(ctx context.Context, key string) error { return b.WaitN(ctx, key, 1) }

// WaitN blocks until n of key's tokens are taken for the caller, or ctx is
// done. Redis gives the caller the first slot free after every caller
// already waiting for key, in any process; the caller then sleeps until
// it on the engine's clock. So callers of one key in this process are let
// through in the order they asked. It never sleeps past ctx's deadline:
//   - n above the burst, or NaN: client.ErrExceedsBurst at once;
//   - a slot after ctx's deadline: a *client.WaitError at once, saying how
//     long the wait would be;
//   - a slot within the deadline whose answer came back from Redis too
//     late to wake at it before the deadline: an error matching
//     context.DeadlineExceeded at once (the slot goes unused);
//   - ctx done while waiting: an error matching ctx.Err(); the slot it
//     held is not given back, so this costs the key a slot (fewer let
//     through, never more);
//   - Redis unavailable: the FailMode's answer (ErrUnavailable under
//     FailClosed);
//   - under FailLocal, while Redis comes back, a slot the local share
//     cannot also give in time: the local share's error (see the package
//     documentation);
//   - closed: client.ErrClosed.
//
// A whole n of a leased key is drawn from its lease at once when the
// lease holds that many; otherwise WaitN asks Redis as above.
func (b *Bucket) WaitN(ctx context.Context, key string, n float64) error {
	if !(n <= b.burst) {
		b.l.stats.refused.Add(1)
		return fmt.Errorf("%w: %v tokens, burst %v", client.ErrExceedsBurst, n, b.burst)
	}
	if n <= 0 {
		if b.l.closed.Load() {
			return client.ErrClosed
		}
		return nil
	}
	if b.ls != nil && n == math.Trunc(n) && !b.l.closed.Load() && ctx.Err() == nil && !b.l.heldLocal(b.fb.orNil()) && b.ls.draw(key, uint64(n)) {
		return nil
	}
	return b.l.wait(ctx, key, n, b.fb.orNil())
}

// Delay is how long a caller wanting one of key's tokens would wait now,
// behind every caller already waiting for key: 0 for a key not seen. It
// takes nothing. After Close it is client.Never; with Redis unavailable,
// the FailMode's (0 open, UnavailableWait closed, the local limit's).
func (b *Bucket) Delay(key string) time.Duration { return b.l.delay(key, b.fb.orNil()) }

// Tokens is how many tokens key holds now, to a thousandth: the burst for
// a key not seen, 0 after Close or with Redis unavailable.
func (b *Bucket) Tokens(key string) float64 {
	v, ok := b.l.look(key)
	if !ok {
		return 0
	}
	return min(v.left, b.burst)
}

// Stats are the bucket's counts in this process. With leases on, they
// count lease calls among Calls and Failures, requests let through from
// leases among Admitted, and those a lease refused among Refused and
// Remembered (LeaseStats has the leases' own counts).
func (b *Bucket) Stats() Stats {
	s := b.l.stats.read()
	if b.ls != nil {
		l := b.ls.stats()
		s.Calls += l.Calls
		s.Failures += l.Failures
		s.Admitted += l.Draws
		s.Refused += l.Refused
		s.Remembered += l.Refused
	}
	return s
}

// LeaseStats are the bucket's lease counts in this process, read without
// blocking; all 0 with leases off.
func (b *Bucket) LeaseStats() LeaseStats {
	if b.ls == nil {
		return LeaseStats{}
	}
	return b.ls.stats()
}

// Close stops the bucket's actor within ctx: callers waiting for an answer
// from Redis get ErrClosed (or false), and calls in flight are cut short
// through their ctx and waited for. go-redis ends a call waiting for a
// connection at once, but one waiting for Redis's reply only at its
// deadline (Config.Timeout, with ContextTimeoutEnabled) or its own read
// timeout, so Close may wait that long, within ctx. Later calls end at
// once. A second Close returns nil.
//
// With leases on, no request is let through from a lease once Close has
// begun. Close then waits for the lease calls in flight and gives Redis
// back every token this process holds unspent, in one round trip, all
// within ctx. The engine's Shutdown does the same for a Bucket not
// closed. When ctx ends before the lease calls in flight, Close returns
// its error and what they grant goes back once they land, within a
// Timeout. A give-back that fails or is cut short loses those tokens to
// the fleet until Redis refills them (fewer let through, never more).
func (b *Bucket) Close(ctx context.Context) error {
	if b.ls != nil {
		b.ls.shut.Store(true)
	}
	err := b.l.close(ctx, b.fb.orNil())
	if b.ls != nil {
		if err2 := b.ls.stop(ctx); err == nil {
			err = err2
		}
	}
	return err
}

// bucketLocal is FailLocal's limit for a Bucket.
type bucketLocal struct{ *client.KeyedBucket }

func (k *bucketLocal) orNil() local {
	if k == nil {
		return nil
	}
	return k
}
func (k *bucketLocal) tryN(key string, n float64) client.Decision { return k.TryN(key, n) }
func (k *bucketLocal) waitN(ctx context.Context, key string, n float64) error {
	return k.WaitN(ctx, key, n)
}

var _ client.KeyedLimiter = (*Bucket)(nil)
