package moonredis

import (
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/policy"
)

// FuzzAgreesWithPolicy drives a Redis bucket and an exact Redis window
// through a sequence of calls and clock steps, beside the pure core's
// Bucket and Window given the same calls at the same instants, and
// requires the same answers. Steps are 37 ms, so no answer sits exactly
// on a boundary where floating point could tip it either way: the bucket
// earns 0.37 of a token a step, and no event is ever exactly a window old.
func FuzzAgreesWithPolicy(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 6, 0, 3, 3, 3, 3, 30, 3, 0, 1})
	f.Add([]byte{1, 1, 1, 2, 10, 0, 1, 0, 30, 30, 30, 3, 7, 3, 11, 3})
	f.Add([]byte{3, 3, 3, 3, 3, 30, 30, 30, 30, 3, 3, 3, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 64 {
			return
		}
		fk := newFake(t)
		const rate, burst, allow = 10, 3, 3
		b, err := NewBucket(fk.eng, fk.cfg(), rate, burst)
		if err != nil {
			t.Fatal(err)
		}
		w, err := NewWindow(fk.eng, fk.cfg(), allow, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		buckets := map[string]*policy.Bucket{}
		windows := map[string]*policy.Window{}
		for i, op := range ops {
			now := fk.clock.Now()
			key := string(rune('a' + (op>>2)%2))
			switch op % 4 {
			case 0, 1:
				n := float64(1 + op%4)
				ref, ok := buckets[key]
				if !ok {
					ref = policy.NewBucket(rate, burst, now)
					buckets[key] = ref
				}
				want := ref.Take(now, n)
				if got := b.AllowN(key, n); got != want {
					t.Fatalf("step %d: bucket AllowN(%s, %v) = %v, the core says %v", i, key, n, got, want)
				}
			case 2:
				fk.advance(time.Duration(op>>2%8) * 37 * time.Millisecond)
			case 3:
				ref, ok := windows[key]
				if !ok {
					ref = policy.NewWindow(allow, time.Second)
					windows[key] = ref
				}
				want := ref.Take(now)
				if got := w.Allow(key); got != want {
					t.Fatalf("step %d: window Allow(%s) = %v, the core says %v", i, key, got, want)
				}
			}
		}
	})
}
