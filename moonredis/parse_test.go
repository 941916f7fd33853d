package moonredis

import (
	"strings"
	"testing"
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
