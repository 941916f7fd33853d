package actors

import (
	"math"
	"testing"
)

// TestHugeBurstLends: a bucket whose burst is near the largest float lends
// its lease like any other (the lease and what the bucket holds are
// compared as floats, before the conversion to an integer that would
// overflow), so its Allows are drawn, not asked of the actor.
func TestHugeBurstLends(t *testing.T) {
	h := newHarness(t)
	ref, credit, err := SpawnBucketCredit(h.e, "", 1, math.MaxFloat64)
	if err != nil {
		t.Fatal(err)
	}
	reply := make(chan Permit, 1)
	ref.Send(&Left{Now: h.clock.Now(), Reply: reply})
	<-reply // the actor has lent by now, after Started and after this
	if !credit.Draw(1) {
		t.Fatal("a bucket of burst MaxFloat64 lent nothing")
	}
}
