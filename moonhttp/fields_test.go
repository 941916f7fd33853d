package moonhttp_test

import (
	"math"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moonhttp"
)

// fixed is a Limiter that always answers d.
type fixed client.Decision

func (f fixed) Try(string) client.Decision { return client.Decision(f) }

// fieldsOf is the RateLimit-Policy and RateLimit fields Limit sends for p
// when the limiter answers d.
func fieldsOf(p moonhttp.Policy, d client.Decision) (string, string) {
	w := httptest.NewRecorder()
	moonhttp.Limit(fixed(d), p)(ok).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	return w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit")
}

// TestPolicyFields: what each policy says, for the odd numbers too: a
// bucket's q is its burst as the bucket holds it, w the time to refill it
// in whole seconds rounded up; a quota that never comes back has no w, and
// an allowed answer from it no t.
func TestPolicyFields(t *testing.T) {
	allowed := client.Decision{OK: true, Left: 1}
	tests := []struct {
		name       string
		p          moonhttp.Policy
		d          client.Decision
		policy, rl string
	}{
		{"bucket", moonhttp.BucketPolicy(10, 20), allowed, `"default";q=20;w=2`, `"default";r=1;t=2`},
		{"bucket, fractional burst", moonhttp.BucketPolicy(1, 2.5), allowed, `"default";q=2;w=3`, `"default";r=1;t=2`},
		{"bucket, burst 0 is a second's worth", moonhttp.BucketPolicy(5, 0), allowed, `"default";q=5;w=1`, `"default";r=1;t=1`},
		{"bucket, fast refill rounds w up to 1", moonhttp.BucketPolicy(1000, 10), allowed, `"default";q=10;w=1`, `"default";r=1;t=1`},
		{"bucket, +Inf rate", moonhttp.BucketPolicy(math.Inf(1), 3), allowed, `"default";q=3;w=1`, `"default";r=1;t=0`},
		{"bucket, slow refill as it is", moonhttp.BucketPolicy(1e-6, 5), allowed, `"default";q=5;w=5000000`, `"default";r=1;t=4000000`},
		{"bucket, refill past a Duration", moonhttp.BucketPolicy(1e-12, 5), allowed, `"default";q=5;w=9223372037`, `"default";r=1;t=9223372037`},
		{"bucket that never refills", moonhttp.BucketPolicy(0, 5), allowed, `"default";q=5`, `"default";r=1`},
		{"bucket that never refills, refused", moonhttp.BucketPolicy(0, 5), client.Decision{Wait: 1 << 62}, `"default";q=5`, `"default";r=0;t=86400`},
		{"window", moonhttp.WindowPolicy(100, time.Minute), allowed, `"default";q=100;w=60`, `"default";r=1;t=60`},
		{"quota past a structured-field Integer", moonhttp.WindowPolicy(math.MaxInt, time.Second), client.Decision{OK: true, Left: math.MaxInt},
			`"default";q=999999999999999;w=1`, `"default";r=999999999999999;t=1`},
		{"window of two days", moonhttp.WindowPolicy(3, 48*time.Hour), allowed, `"default";q=3;w=172800`, `"default";r=1;t=172800`},
		{"window in sub-seconds", moonhttp.WindowPolicy(3, 1500*time.Millisecond), allowed, `"default";q=3;w=2`, `"default";r=1;t=2`},
		{"window of nothing", moonhttp.WindowPolicy(3, 0), allowed, `"default";q=3`, `"default";r=1`},
		{"negative quota", moonhttp.WindowPolicy(-1, time.Minute), allowed, `"default";q=0;w=60`, `"default";r=0;t=60`},
		{"left never above q", moonhttp.WindowPolicy(2, time.Minute), client.Decision{OK: true, Left: 9}, `"default";q=2;w=60`, `"default";r=2;t=60`},
		{"a name is quoted and escaped", moonhttp.Policy{Name: `a"b\c` + "\n", Quota: 1, Window: time.Second}, allowed,
			`"a\"b\\c?";q=1;w=1`, `"a\"b\\c?";r=1;t=1`},
	}
	for _, tc := range tests {
		pol, rl := fieldsOf(tc.p, tc.d)
		if pol != tc.policy || rl != tc.rl {
			t.Errorf("%s: RateLimit-Policy %s, RateLimit %s; want %s and %s", tc.name, pol, rl, tc.policy, tc.rl)
		}
	}
}
