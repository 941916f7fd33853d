package policy

import (
	"math"
	"testing"
)

// TestBucketRetune: tokens earned before a Retune count at the old rate,
// the new rate from then on; a lower burst cuts what is held.
func TestBucketRetune(t *testing.T) {
	const s = int64(1e9)
	cases := []struct {
		name        string
		rate, burst float64 // the new ones
		at          int64   // when retuned; the bucket (10/s, burst 10) is emptied at 0
		check       int64
		want        float64
	}{
		{"faster keeps what was earned", 100, 10, s / 10, s/10 + s/100, 2},
		{"slower keeps what was earned", 1, 10, s / 2, s/2 + s, 6},
		{"lower burst cuts", 10, 3, s, s, 3},
		{"higher burst fills on", 10, 20, s, 2 * s, 20},
		{"rate 0 keeps and earns nothing", 0, 10, s / 2, 100 * s, 5},
		{"burst 0 is a second's worth", 4, 0, s, s, 4},
	}
	for _, c := range cases {
		b := NewBucket(10, 10, 0)
		b.Take(0, 10)
		b.Retune(c.at, c.rate, c.burst)
		if got := b.Tokens(c.check); got != c.want {
			t.Errorf("%s: Tokens(%d) = %v, want %v", c.name, c.check, got, c.want)
		}
	}
}

// TestBucketRetuneBackwards: a Retune stamped before the reference time
// neither mints tokens nor moves the reference back.
func TestBucketRetuneBackwards(t *testing.T) {
	b := NewBucket(10, 10, 0)
	b.Take(1e9, 10)
	b.Retune(0, 100, 10)
	if got := b.Tokens(1e9); got != 0 {
		t.Errorf("Tokens(1s) after a Retune at 0 = %v, want 0", got)
	}
	if got := b.Tokens(1e9 + 1e7); got != 1 {
		t.Errorf("Tokens(1.01s) = %v, want 1 at the new rate", got)
	}
}

func TestBucketPut(t *testing.T) {
	b := NewBucket(1, 10, 0)
	b.Take(0, 8)
	b.Put(0, 3)
	if got := b.Tokens(0); got != 5 {
		t.Errorf("after Put(3) Tokens = %v, want 5", got)
	}
	b.Put(0, 100)
	if got := b.Tokens(0); got != 10 {
		t.Errorf("Put past the burst: Tokens = %v, want 10", got)
	}
	b.Take(0, 10)
	for _, n := range []float64{0, -1, math.NaN()} {
		b.Put(0, n)
	}
	if got := b.Tokens(0); got != 0 {
		t.Errorf("Put of nothing changed Tokens to %v", got)
	}
}
