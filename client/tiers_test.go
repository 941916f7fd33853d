package client

import (
	"strings"
	"testing"
	"time"
)

// TestTieredBucket: free and paid keys are held to their tier's numbers,
// a tier is retuned on its own, and a key of an unknown tier gets the
// default one.
func TestTieredBucket(t *testing.T) {
	r := newLimitRig(t)
	tierOf := func(key string) string {
		tier, _, _ := strings.Cut(key, ":")
		return tier
	}
	tb, err := NewTieredBucket(r.eng, tierOf, map[string]Rate{
		"":     {PerSecond: 1, Burst: 2},
		"paid": {PerSecond: 10, Burst: 5},
	})
	if err != nil {
		t.Fatal(err)
	}
	count := func(key string) int {
		n := 0
		for tb.Allow(key) {
			n++
		}
		return n
	}
	if got := count("paid:a"); got != 5 {
		t.Errorf("a paid key got %d at once, want its burst 5", got)
	}
	if got := count(":b"); got != 2 {
		t.Errorf("a free key got %d, want 2", got)
	}
	if got := count("gold:c"); got != 2 {
		t.Errorf("a key of an unknown tier got %d, want the default's 2", got)
	}
	if err := tb.Tier("paid").SetLimit(100); err != nil {
		t.Fatal(err)
	}
	r.to(50 * time.Millisecond)
	if got := count("paid:a"); got != 5 {
		t.Errorf("a paid key after 50ms at the new 100/s got %d, want 5", got)
	}
	if got := count(":b"); got != 0 {
		t.Errorf("a free key got %d after 50ms at 1/s: the retune reached the wrong tier", got)
	}
	if s := tb.Stats(); s.Allowed != 14 || s.Refused != 5 {
		t.Errorf("Stats: allowed %d, refused %d; want 14 and 5", s.Allowed, s.Refused)
	}
	if _, err := NewTieredBucket(r.eng, tierOf, map[string]Rate{"paid": {PerSecond: 1, Burst: 1}}); err == nil {
		t.Error("tiers without a default were accepted")
	}
}
