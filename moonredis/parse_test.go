package moonredis

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/redistest"
)

// FuzzParse: whatever a script (or something posing as one) answers, parse
// returns exactly n verdicts with no wait below zero, or an error; it never
// panics.
func FuzzParse(f *testing.F) {
	f.Add("1,0,2000;0,1000000,0", 2)
	f.Add("0,-5,-1", 1)
	f.Add("", 0)
	f.Add(";;", 3)
	f.Add("1,99999999999999999999,0", 1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<10 {
			return
		}
		out, err := parse(nil, s, n)
		if err != nil {
			return
		}
		if len(out) != n {
			t.Fatalf("parse(%q, %d) gave %d verdicts", s, n, len(out))
		}
		for _, v := range out {
			if v.wait < 0 {
				t.Fatalf("parse(%q) gave a wait of %v", s, v.wait)
			}
		}
		if n > 0 && strings.Count(s, ";") != n-1 {
			t.Fatalf("parse(%q, %d) accepted a wrong count", s, n)
		}
	})
}

// TestBigNumbers: waits of years and counts of hundreds of billions come
// back from the scripts readable, and numbers too big to come back are
// refused when the limiter is made. Redis's Lua writes numbers from 1e14
// on with an exponent, and miniredis's does not, so the real server is
// the one that shows it.
func TestBigNumbers(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		f := newFake(t)
		bigNumbers(t, f.eng, f.cfg())
	})
	t.Run("redis-server", func(t *testing.T) {
		srv := redistest.New(t)
		cfg := Config{Client: realClient(t, srv.Addr()), Prefix: fmt.Sprintf("test:%d:", time.Now().UnixNano())}
		bigNumbers(t, realEngine(t), cfg)
	})
}

func bigNumbers(t *testing.T, eng *engine.Engine, cfg Config) {
	const year = 365 * 24 * time.Hour
	// about is whether got is want, or less by what a real clock moved.
	about := func(got, want time.Duration) bool { return got <= want && got > want-time.Minute }
	slow, err := NewBucket(eng, cfg, 1/(10*year).Seconds(), 1)
	if err != nil {
		t.Fatal(err)
	}
	slow.Allow("slow")
	if d := slow.Try("slow"); d.OK || !about(d.Wait, 10*year) {
		t.Errorf("Try of a bucket of one token in ten years, spent = %+v, want a refusal of 10 years", d)
	}
	big, err := NewBucket(eng, cfg, 1e11, 2e11)
	if err != nil {
		t.Fatal(err)
	}
	if got := big.Tokens("big"); got < 2e11-1 {
		t.Errorf("Tokens of a bucket of 2e11 = %v, want 2e11", got)
	}
	long, err := NewWindow(eng, cfg, 1, 5*year)
	if err != nil {
		t.Fatal(err)
	}
	long.Allow("long")
	if got := long.Delay("long"); !about(got, 5*year) {
		t.Errorf("Delay of a window of one in five years, spent = %v, want 5 years", got)
	}
	for _, st := range []Stats{slow.Stats(), big.Stats(), long.Stats()} {
		if st.Failures != 0 {
			t.Errorf("Stats = %+v: want no failed call", st)
		}
	}
	if _, err := NewBucket(eng, cfg, 1, 1e16); err == nil {
		t.Error("NewBucket with a burst of 1e16: no error")
	}
	if _, err := NewBucket(eng, cfg, 1e-20, 1); err == nil {
		t.Error("NewBucket with a token every 1e20 seconds: no error")
	}
	if _, err := NewWindow(eng, cfg, 1e16, time.Second); err == nil {
		t.Error("NewWindow with an allow of 1e16: no error")
	}
}
