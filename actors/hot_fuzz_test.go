package actors

import (
	"hash/maphash"
	"strconv"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/policy"
)

// hotCredit is a keyed bucket's credit for one key, drawn as a caller
// draws it: through the Hot, by the key's hash.
type hotCredit struct {
	h    *Hot
	hash uint64
	key  string
}

func (c hotCredit) Draw(n int64) bool      { return c.h.Draw(c.hash, c.key, n) }
func (c hotCredit) DrawAt(_, n int64) bool { return c.Draw(n) }
func (c hotCredit) Drawn() int64           { return c.h.Drawn() }
func newHotCredit(h *Hot, key string) hotCredit {
	return hotCredit{h: h, hash: maphash.String(h.seed, key), key: key}
}

// FuzzKeyedCreditActor is FuzzCreditActor for one key of a keyed bucket
// that lends to its hot keys: the key turns hot after a run of asks, is
// lent to, drawn from, parked on, asked for Left and let go as the random
// run goes, and no stretch of time may see more of its tokens granted than its
// exact bucket allows. Before the run, cold keys fill the actor's slice,
// and a clock jump in the run forgets them, so the key's entry moves when
// the actor compacts its keys; every hot key's place is checked after the
// run.
func FuzzKeyedCreditActor(f *testing.F) {
	f.Add(uint8(3), uint8(2), uint16(0), []byte{opDraw, 255, opDraw, 255, opStep, 3, opDraw, 2, opPark, 0, opDraw, 1, opJump, 1, opDraw, 255})
	f.Add(uint8(2), uint8(1), uint16(3000), []byte{opDraw, 255, opCreditLeft, 0, opJump, 20, opDraw, 255, opDraw, 255, opJump, 30, opDraw, 255})
	f.Add(uint8(0), uint8(2), uint16(2000), []byte{opDraw, 255, opDraw, 0, opDraw, 0, opAsk, 1, opJump, 2, opDraw, 255})
	// Hot while the cold keys, full again a millisecond on, are forgotten a
	// slack (12.5ms) later and the slice compacted under it.
	f.Add(uint8(3), uint8(2), uint16(3000), []byte{opDraw, 255, opDraw, 255, opStep, 120, opDraw, 255, opStep, 120, opDraw, 255})
	r := newFuzzRig(f)
	f.Fuzz(func(t *testing.T, k1, k2 uint8, cold uint16, ops []byte) {
		if len(ops) > 512 {
			ops = ops[:512]
		}
		v := r.begin()
		rate := [...]float64{0, 1, 10, 1000}[k1%4]
		burst := [...]float64{16, 32, 100}[k2%3]
		ref, hot, err := SpawnKeyedBucketCredit(r.e, "", rate, burst, maphash.MakeSeed())
		ref = r.spawned(t, ref, err)
		for i := range int(cold % 4096) {
			m := &Allow{Now: v.Now(), Key: "cold-" + strconv.Itoa(i), N: 1, Reply: make(chan Permit, 1)}
			ref.Send(m)
			<-m.Reply
		}
		pol := bucketRef{b: policy.NewBucket(rate, burst, v.Now()), rate: rate, burst: burst}
		places := func() error {
			m := &hotPlaces{reply: make(chan error, 1)}
			ref.Send(m)
			return <-m.reply
		}
		runCredit(t, v, ref.Send, "hot", newHotCredit(hot, "hot"), pol, false, time.Millisecond, ops, places)
	})
}
