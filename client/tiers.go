package client

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// TieredBucket gives each key the limits of its tier — free and paid, say
// — with one KeyedBucket per tier: keys are independent as in a
// KeyedBucket, and a tier is retuned on its own through Tier (SetLimit,
// SetBurst) while the server runs. Which tier a key is in is the caller's
// to say, through the tierOf function given to NewTieredBucket; a key
// whose tier is unknown gets the default tier, "".
//
// Per-key limits come in tiers rather than as a function of each key
// because a key's bucket outlives a call: with tiers, the numbers a key
// is held to are those of its tier now, and a key that moves to another
// tier starts there as a key never seen, full.
//
// It is safe for concurrent use. Build one with NewTieredBucket; the zero
// TieredBucket is not usable.
type TieredBucket struct {
	tierOf func(key string) string
	tiers  map[string]*KeyedBucket // fixed once built
}

// NewTieredBucket starts a KeyedBucket per tier on eng. tiers must name
// the default tier "", which keys of unknown tiers get; tierOf names a
// key's tier, and may be nil (every key is in the default tier). tierOf is
// called on every call, from the caller's goroutine, and must be safe for
// concurrent use. It returns an error if eng is nil, tiers has no default
// tier, or a tier's actor is refused; then nothing is left running.
func NewTieredBucket(eng *Engine, tierOf func(key string) string, tiers map[string]Rate) (*TieredBucket, error) {
	if eng == nil {
		return nil, errors.New("moonpool: NewTieredBucket: nil engine")
	}
	if _, ok := tiers[""]; !ok {
		return nil, errors.New(`moonpool: NewTieredBucket: no default tier ""`)
	}
	t := &TieredBucket{tierOf: tierOf, tiers: make(map[string]*KeyedBucket, len(tiers))}
	for name, r := range tiers {
		kb, err := NewKeyedBucket(eng, r.PerSecond, r.Burst)
		if err != nil {
			t.Close(context.Background())
			return nil, fmt.Errorf("moonpool: NewTieredBucket: tier %q: %w", name, err)
		}
		t.tiers[name] = kb
	}
	return t, nil
}

// of is the keyed bucket of key's tier.
func (t *TieredBucket) of(key string) *KeyedBucket {
	if t.tierOf != nil {
		if kb, ok := t.tiers[t.tierOf(key)]; ok {
			return kb
		}
	}
	return t.tiers[""]
}

// Tier is the KeyedBucket of the named tier, nil if there is none: to
// retune the tier (SetLimit, SetBurst) or read its Stats and Quota.
func (t *TieredBucket) Tier(name string) *KeyedBucket { return t.tiers[name] }

// Allow is KeyedBucket.Allow in key's tier.
func (t *TieredBucket) Allow(key string) bool { return t.of(key).Allow(key) }

// AllowN is KeyedBucket.AllowN in key's tier.
func (t *TieredBucket) AllowN(key string, n float64) bool { return t.of(key).AllowN(key, n) }

// Try is KeyedBucket.Try in key's tier: what moonhttp.Limit asks. (A
// TieredBucket has no one Quota, so Limit states the Policy it is given.)
func (t *TieredBucket) Try(key string) Decision { return t.of(key).Try(key) }

// TryN is KeyedBucket.TryN in key's tier.
func (t *TieredBucket) TryN(key string, n float64) Decision { return t.of(key).TryN(key, n) }

// Wait is KeyedBucket.Wait in key's tier.
func (t *TieredBucket) Wait(ctx context.Context, key string) error { return t.of(key).Wait(ctx, key) }

// WaitN is KeyedBucket.WaitN in key's tier.
func (t *TieredBucket) WaitN(ctx context.Context, key string, n float64) error {
	return t.of(key).WaitN(ctx, key, n)
}

// Delay is KeyedBucket.Delay in key's tier.
func (t *TieredBucket) Delay(key string) time.Duration { return t.of(key).Delay(key) }

// Tokens is KeyedBucket.Tokens in key's tier.
func (t *TieredBucket) Tokens(key string) float64 { return t.of(key).Tokens(key) }

// Stats is the counts of every tier added up; Tier(name).Stats() has one
// tier's. It never blocks.
func (t *TieredBucket) Stats() LimiterStats {
	var s LimiterStats
	for _, kb := range t.tiers {
		o := kb.Stats()
		s.Allowed += o.Allowed
		s.Refused += o.Refused
		s.Waited += o.Waited
		s.WaitTime += o.WaitTime
	}
	return s
}

// Close stops every tier, as KeyedBucket.Close, and returns their errors
// joined.
func (t *TieredBucket) Close(ctx context.Context) error {
	var errs []error
	for _, kb := range t.tiers {
		errs = append(errs, kb.Close(ctx))
	}
	return errors.Join(errs...)
}
