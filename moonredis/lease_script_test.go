package moonredis

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// FuzzLeaseScript runs the lease script on a key in any state and holds it
// to the rules of leaseBody: the grant never exceeds the ask, the whole
// tokens the bucket holds after the give-back, or the lessee's share; the
// theoretical arrival time never falls below now, so a give-back never
// fills the bucket above its burst; and a call sent again changes nothing.
func FuzzLeaseScript(f *testing.F) {
	f.Add(int64(0), 1000.0, 100.0, int64(10), int64(0), int64(0), uint8(0))      // a full bucket
	f.Add(int64(50_000), 1000.0, 100.0, int64(80), int64(0), int64(0), uint8(0)) // half empty: a partial grant
	f.Add(int64(100_000), 1000.0, 100.0, int64(5), int64(0), int64(0), uint8(2)) // empty, others leasing
	f.Add(int64(0), 1000.0, 100.0, int64(0), int64(0), int64(500), uint8(0))     // a give-back beyond the burst
	f.Add(int64(30_000), 1000.0, 100.0, int64(0), int64(0), int64(20), uint8(1)) // a give-back alone
	f.Add(int64(-5_000_000), 7.5, 3.0, int64(3), int64(2), int64(1), uint8(4))   // a tat long past
	f.Add(int64(10), 0.5, 1e6, int64(1<<30), int64(0), int64(0), uint8(0))       // a huge ask
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		f.Fatal(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	nowT := time.Unix(1_700_000_000, 0)
	mr.SetTime(nowT)
	now := float64(nowT.UnixMicro())
	ctx := context.Background()
	var round int
	f.Fuzz(func(t *testing.T, off int64, perToken, burst float64, ask, held, give int64, others uint8) {
		if !(perToken >= 0.01 && perToken <= 1e9) || !(burst >= 1 && burst <= 1e12) || perToken*burst > 1e15 ||
			ask < 0 || held < 0 || give < 0 || ask > 1<<40 || held > 1<<40 || give > 1<<40 || off < -1e12 || off > 1e12 {
			t.Skip()
		}
		round++
		key := fmt.Sprint("fuzz:", round)
		tat0 := now + float64(off)
		list := ""
		for i := range int(others % 8) {
			list += fmt.Sprintf("o%d=%.0f ", i, now+1e6)
		}
		if err := rdb.HSet(ctx, key, "t", fmt.Sprintf("%.0f", tat0), "lessees", list).Err(); err != nil {
			t.Fatal(err)
		}
		args := []any{"me", "me.1", perToken, burst, 200, ask, held, give, 50_000}
		s, err := leaseScript.Run(ctx, rdb, []string{key}, args...).Text()
		if err != nil {
			t.Fatal(err)
		}
		g, err := parseGrant(s)
		if err != nil {
			t.Fatal(err)
		}
		tat1 := math.Max(tat0, now)
		tat1 = math.Max(tat1-float64(give)*perToken, now)
		avail := math.Floor((now + perToken*burst - tat1) / perToken)
		n := int64(others % 8)
		if ask > 0 {
			n++
		}
		share := max(math.Floor(burst/float64(max(n, 1))), 1)
		if g.tokens > ask || float64(g.tokens) > math.Max(avail, 0)+1e-6 || float64(g.tokens) > math.Max(share-float64(held), 0) {
			t.Fatalf("granted %d: ask %d, %v available, share %v less %d held", g.tokens, ask, avail, share, held)
		}
		if g.lessees != n {
			t.Errorf("%d lessees, want %d", g.lessees, n)
		}
		tatS, err := rdb.HGet(ctx, key, "t").Result()
		if err != nil {
			t.Fatal(err)
		}
		tat2, err := strconv.ParseFloat(tatS, 64)
		if err != nil {
			t.Fatal(err)
		}
		if tat2 < now {
			t.Fatalf("tat %v below now %v: the bucket holds more than its burst", tat2, now)
		}
		if want := tat1 + float64(g.tokens)*perToken; math.Abs(tat2-math.Ceil(want)) > 1+want*1e-12 {
			t.Fatalf("tat %v, want %v: the grant and the give-back moved it by another amount", tat2, want)
		}
		again, err := leaseScript.Run(ctx, rdb, []string{key}, args...).Text()
		if err != nil {
			t.Fatal(err)
		}
		tat3, _ := rdb.HGet(ctx, key, "t").Result()
		if again != s || tat3 != tatS {
			t.Fatalf("sent again: answered %q (first %q), tat %s (first %s)", again, s, tat3, tatS)
		}
	})
}

// TestParseGrant: an answer that is not three whole numbers at or above
// zero is an error, never a grant.
func TestParseGrant(t *testing.T) {
	for _, c := range []struct {
		in   string
		want grant
		ok   bool
	}{
		{"5,0,1", grant{5, 0, 1}, true},
		{"0,1500,3", grant{0, 1500, 3}, true},
		{"", grant{}, false},
		{"5,0", grant{}, false},
		{"-1,0,1", grant{}, false},
		{"1e3,0,1", grant{}, false},
		{"1,2,3,4", grant{}, false},
	} {
		g, err := parseGrant(c.in)
		if (err == nil) != c.ok || g != c.want {
			t.Errorf("parseGrant(%q) = %+v, %v; want %+v, ok %v", c.in, g, err, c.want, c.ok)
		}
	}
}
