package actors

import (
	"hash/maphash"
	"strconv"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/moontest"
	"github.com/moonpool-go/moonpool/policy"
)

// FuzzKeyedIndex: a keyed bucket whose names share a handful of hashes, so
// every look-up walks a chain, answers each key as that key's own exact
// bucket would, made full when first seen, through calls, forgetting and
// the compaction that renumbers every entry. A key found under another's
// entry, a chain broken by a forget, or an entry lost by a compaction
// shows as a wrong answer or a wrong count of keys.
//
// Each op is two bytes: what, and an argument.
//
//	0 Allow of key arg%names, 1 token
//	1 Allow of key arg%names, 3 tokens
//	2 Left of key arg%names
//	3 the clock moves arg ms, its timers firing
//	4 arg*8 cold keys, each taking once, up to 4,096 in all
func FuzzKeyedIndex(f *testing.F) {
	f.Add(uint8(1), []byte{0, 0, 0, 1, 0, 2, 1, 0, 2, 1, 3, 200, 0, 0, 2, 2})
	f.Add(uint8(2), []byte{4, 255, 0, 3, 0, 4, 3, 255, 3, 255, 2, 3, 0, 3, 4, 40, 3, 255, 0, 5})
	f.Add(uint8(0), []byte{0, 0, 0, 0, 0, 0, 0, 0, 3, 10, 0, 0, 2, 0, 0, 9, 2, 9, 3, 255, 3, 255, 2, 0})
	// One hash for all. k1 is made, then k0 (the chain's head), and k1
	// takes again; k0 is forgotten first, and k1 must still be found.
	f.Add(uint8(0), []byte{0, 1, 0, 0, 3, 5, 0, 1, 3, 11, 1, 1})
	// The same with k0 in the middle of the chain, behind k2.
	f.Add(uint8(0), []byte{0, 1, 0, 0, 0, 2, 3, 5, 0, 1, 0, 2, 3, 11, 1, 1})
	// 2,040 cold keys go at once, and the slice is compacted under k0,
	// which has taken its whole burst since and must still be found.
	f.Add(uint8(1), []byte{4, 255, 3, 5, 1, 0, 3, 10, 1, 0, 2, 0})
	r := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, bits uint8, ops []byte) {
		if len(ops) > 400 {
			ops = ops[:400]
		}
		v := r.begin()
		const rate, burst, names = 100, 3, 24
		k := newKeyed(r.e, newBucketRule(rate, burst), maphash.MakeSeed())
		k.index.blunt = ^(uint64(1)<<(bits%3) - 1) // 1, 2 or 4 hashes for every name, compaction or not
		ref, err := r.e.Spawn("", k, nil)
		ref = r.spawned(t, ref, err)

		want := map[string]*policy.Bucket{}
		allow := func(key string, n float64) {
			t.Helper()
			now := v.Now()
			b := want[key]
			if b == nil {
				b = policy.NewBucket(rate, burst, now)
				want[key] = b
			}
			m := &Allow{Now: now, Key: key, N: n, Reply: make(chan Permit, 1)}
			ref.Send(m)
			if got, exact := recv(t, m.Reply, "Allow").OK, b.Take(now, n); got != exact {
				t.Fatalf("Allow(%q, %v) at +%v: %v, its own bucket says %v", key, n, time.Duration(now-moontest.Epoch), got, exact)
			}
		}
		settle := func() { left(ref, "", v.Now()) }
		cold := 0
		for i := 0; i+1 < len(ops); i += 2 {
			arg := int(ops[i+1])
			key := "k" + strconv.Itoa(arg%names)
			switch ops[i] % 5 {
			case 0:
				allow(key, 1)
			case 1:
				allow(key, 3)
			case 2:
				now := v.Now()
				b := want[key]
				if b == nil {
					b = policy.NewBucket(rate, burst, now)
				}
				if got, exact := left(ref, key, now), b.Tokens(now); got != exact {
					t.Fatalf("Left(%q): %v, its own bucket holds %v", key, got, exact)
				}
			case 3:
				stepClock(t, v, v.Now()+int64(arg)*int64(time.Millisecond), settle)
			case 4:
				for range min(arg*8, 4096-cold) { // enough to compact, and a bound
					allow("cold-"+strconv.Itoa(cold), 1)
					cold++
				}
			}
		}
		// Every key is full a burst/rate (30ms) after its last take, and
		// forgotten within an eighth more: then none is left, and the slice
		// has given its room back.
		stepClock(t, v, v.Now()+int64(time.Second), settle)
		if n := keyRoom(ref); n[0] != 0 || n[1] > 1024 {
			t.Fatalf("%d keys in room for %d a second after the last call, want none", n[0], n[1])
		}
		for key, b := range want {
			if got := left(ref, key, v.Now()); got != b.Tokens(v.Now()) {
				t.Fatalf("Left(%q) after forgetting: %v, want %v", key, got, b.Tokens(v.Now()))
			}
		}
	})
}
