package policy

import "time"

// Bucket is a token bucket.
type Bucket struct{}

// NewBucket returns a full bucket.
func NewBucket(rate, burst float64, at int64) *Bucket { return &Bucket{} }

// Take takes n tokens.
func (b *Bucket) Take(now int64, n float64) bool { return false }

// Next is how long until n tokens.
func (b *Bucket) Next(now int64, n float64) time.Duration { return 0 }

// Tokens is how many are there.
func (b *Bucket) Tokens(now int64) float64 { return 0 }
