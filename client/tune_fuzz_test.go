package client

import (
	"math"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/policy"
)

// FuzzBucketRetune drives a Bucket with AllowN, SetLimit, SetBurst,
// Reserve and Cancel at instants of the virtual clock, beside a policy
// Bucket retuned in lockstep, and a copy of it for each reservation that
// never saw that reservation. Every answer must be the exact bucket's, and
// a Cancel must give back exactly the difference between the copy without
// the reservation and the bucket with it (no more, when others were
// outstanding meanwhile). The burst stays under 16, so nothing is lent:
// lending admits less, never more, and other tests cover it.
func FuzzBucketRetune(f *testing.F) {
	f.Add([]byte{0, 3, 4, 2, 5, 3, 1, 9, 3, 7, 6, 0, 0, 2})
	f.Add([]byte{4, 5, 0, 9, 3, 200, 0, 1, 6, 0, 2, 1, 6, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 256 {
			in = in[:256]
		}
		r := newLimitRig(t)
		b, err := NewBucket(r.eng, 4, 8)
		if err != nil {
			t.Fatal(err)
		}
		exact := policy.NewBucket(4, 8, r.t0)
		type booked struct {
			res     *Reservation
			without *policy.Bucket // nil once another Cancel made it inexact
			n       float64
		}
		var open []*booked
		var at time.Duration
		for i := 0; i+1 < len(in); i += 2 {
			op, arg := in[i]%7, float64(in[i+1]%16)
			now := r.t0 + int64(at)
			all := func(do func(*policy.Bucket)) {
				do(exact)
				for _, o := range open {
					if o.without != nil {
						do(o.without)
					}
				}
			}
			switch op {
			case 0: // AllowN
				n := arg/2 + 1
				want := exact.Take(now, n)
				if got := b.AllowN(n); got != want {
					t.Fatalf("op %d: AllowN(%v) = %v, exact %v", i/2, n, got, want)
				}
				for _, o := range open {
					if want && o.without != nil && !o.without.Take(now, n) {
						t.Fatalf("op %d: the bucket without a reservation refused what the one with it granted", i/2)
					}
				}
			case 1: // the clock moves
				at += time.Duration(in[i+1]) * 10 * time.Millisecond
				r.to(at)
			case 2: // SetLimit
				rate := arg / 2
				if err := b.SetLimit(rate); err != nil {
					t.Fatal(err)
				}
				burst := b.Burst()
				all(func(p *policy.Bucket) { p.Retune(now, rate, burst) })
			case 3: // SetBurst, 1 to 15
				burst := max(arg, 1)
				if err := b.SetBurst(burst); err != nil {
					t.Fatal(err)
				}
				rate := b.Limit()
				all(func(p *policy.Bucket) { p.Retune(now, rate, burst) })
			case 4: // Reserve
				n := arg/4 + 1
				without := *exact
				want := exact.Take(now, n)
				res := b.Reserve(n)
				if res.OK() != want {
					t.Fatalf("op %d: Reserve(%v) = %v, exact %v", i/2, n, res.OK(), want)
				}
				if want {
					for _, o := range open {
						if o.without != nil {
							o.without.Take(now, n)
						}
					}
					open = append(open, &booked{res: res, without: &without, n: n})
				}
			case 5: // Cancel
				if len(open) == 0 {
					continue
				}
				k := int(in[i+1]) % len(open)
				o := open[k]
				open = append(open[:k], open[k+1:]...)
				got := o.res.Cancel()
				if got < 0 || got > o.n {
					t.Fatalf("op %d: Cancel gave back %v of %v", i/2, got, o.n)
				}
				if o.without != nil {
					// The subtraction rounds; the give-back need not.
					want := o.without.Tokens(now) - exact.Tokens(now)
					if math.Abs(got-want) > 1e-9 {
						t.Fatalf("op %d: Cancel gave back %v, the bucket without it holds %v more", i/2, got, want)
					}
				}
				exact.Put(now, got)
				for _, p := range open {
					p.without = nil // the copies never saw this give-back
				}
			case 6: // Tokens
			}
			if got, want := b.Tokens(), exact.Tokens(r.t0+int64(at)); got != want {
				t.Fatalf("op %d (%d): Tokens = %v, exact %v", i/2, op, got, want)
			}
		}
	})
}
