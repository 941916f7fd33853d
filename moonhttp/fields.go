package moonhttp

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/policy"
)

// Policy is the quota a limiter enforces, as the RateLimit-Policy field
// states it to clients: Quota requests per Window. Build one with
// BucketPolicy or WindowPolicy, from the numbers the limiter was made
// with; they also tell Limit how to read the limiter's answers for the
// RateLimit field. A Policy written out by hand is read as a window's.
//
// The fields are those of draft-ietf-httpapi-ratelimit-headers, revision
// 11 (sections 3 and 4), the revision whose text this package was checked
// against; revision 12 (November 2026) is the latest listed:
//
//	RateLimit-Policy: "default";q=20;w=2
//	RateLimit: "default";r=19;t=1
type Policy struct {
	// Name identifies the policy in both fields. "" is "default". It is
	// sent as a quoted string, so it may hold any printable ASCII.
	Name string
	// Quota is the q parameter: how many requests a client may make in
	// Window. Below zero is read as zero. Above 999,999,999,999,999, the
	// most a structured-field Integer holds, it is read as that.
	Quota int
	// Window is the w parameter, rounded up to whole seconds (the field has
	// no fractions) and at least one. It is sent as it is, however long:
	// the draft sets w no ceiling, and a client that paces itself by a
	// shorter one would be refused. Zero or less leaves w out: a quota that
	// never comes back.
	Window time.Duration

	rate, burst float64 // a bucket's refill per second and most tokens; 0 for a window's quota
}

// BucketPolicy describes a client.KeyedBucket made with the same rate and
// burst: q is the burst (whole requests, rounded down) and w the time the
// bucket takes to fill from empty, rounded up to whole seconds. A client
// that spends q at once and then waits w before the next q is never
// refused, and the bucket, which refills all along, lets a client that
// spreads its requests out do a little better. rate and burst are read as
// client.NewKeyedBucket reads them; a rate <= 0 never refills, so w is left
// out. A fill longer than a time.Duration holds is read as client.Never.
func BucketPolicy(rate, burst float64) Policy {
	if !(rate > 0) {
		rate = 0
	}
	// A full bucket holds its burst: reading it back keeps the rules for
	// odd bursts in policy alone.
	full := policy.NewBucket(rate, burst, 0).Tokens(0)
	p := Policy{Quota: math.MaxInt, rate: rate, burst: full}
	if full < math.MaxInt { // full is at least 1
		p.Quota = int(full)
	}
	if rate > 0 {
		// At least a nanosecond, so a bucket refilled at once (rate +Inf)
		// still says w=1 rather than never.
		p.Window = max(span(full/rate), 1)
	}
	return p
}

// span is s seconds as a Duration, rounded down, and client.Never when it
// is that long or longer.
func span(s float64) time.Duration {
	ns := s * float64(time.Second)
	if !(ns < float64(client.Never)) {
		return client.Never
	}
	return time.Duration(ns)
}

// WindowPolicy describes a client.KeyedWindow made with the same allow and
// window: q is allow and w the window. A window <= 0 counts nothing (as
// client.NewKeyedWindow reads it), so w is left out.
func WindowPolicy(allow int, window time.Duration) Policy {
	return Policy{Quota: allow, Window: window}
}

// name is the policy's name as sent.
func (p Policy) name() string {
	if p.Name == "" {
		return "default"
	}
	return p.Name
}

// window is w in whole seconds, rounded up, at least one; 0 when left out.
func (p Policy) window() int64 {
	if p.Window <= 0 {
		return 0
	}
	return wholeSeconds(p.Window)
}

// reset is the t parameter for an answer: for a refusal, the Retry-After
// (the draft asks that Retry-After not point earlier than t's end); when
// allowed, how long until the quota is whole again at the latest, if
// nobody spends more: for a bucket, until the missing tokens have accrued;
// for a window, the window, by which every request counted now has left
// it. ok is false when that is never (a bucket that does not refill, a
// window of nothing).
func (p Policy) reset(d client.Decision) (seconds int64, ok bool) {
	switch {
	case !d.OK:
		return int64(d.RetryAfter()), true
	case p.rate > 0:
		// Left is whole tokens, rounded down: what is missing is at most
		// the burst less Left.
		missing := p.burst - float64(max(0, d.Left))
		if missing <= 0 {
			return 0, true
		}
		if s := math.Ceil(missing / p.rate); s < float64(neverSeconds) {
			return int64(s), true
		}
		return neverSeconds, true
	case p.Window > 0:
		return p.window(), true
	}
	return 0, false
}

// setFields writes the RateLimit-Policy and RateLimit fields for d, and
// the X-RateLimit ones if legacy.
func (p Policy) setFields(h http.Header, d client.Decision, legacy bool) {
	name := quote(p.name())
	q := min(max(0, p.Quota), maxInteger)
	pol := name + ";q=" + strconv.Itoa(q)
	if w := p.window(); w > 0 {
		pol += ";w=" + strconv.FormatInt(w, 10)
	}
	left := min(max(0, d.Left), q) // never more than the policy says there is
	rl := name + ";r=" + strconv.Itoa(left)
	t, hasT := p.reset(d)
	if hasT {
		rl += ";t=" + strconv.FormatInt(t, 10)
	}
	h["Ratelimit-Policy"] = []string{pol}
	h["Ratelimit"] = []string{rl}
	if legacy {
		h["X-Ratelimit-Limit"] = []string{strconv.Itoa(q)}
		h["X-Ratelimit-Remaining"] = []string{strconv.Itoa(left)}
		if hasT {
			h["X-Ratelimit-Reset"] = []string{strconv.FormatInt(t, 10)}
		}
	}
}

// quote writes s as a structured-field String (RFC 8941, section 3.3.3):
// in double quotes, with quote and backslash escaped. Characters a String
// cannot hold (controls, non-ASCII) become '?', so a name never breaks the
// field.
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// maxInteger is the largest Integer a structured field may carry
// (RFC 8941, section 3.3.1): fifteen digits. A larger q or r says this
// many, which no client will spend before the quota is whole again.
const maxInteger = 999_999_999_999_999

// neverSeconds is client.Never in whole seconds, rounded up: the most w or
// t says. Its ten digits fit well inside the fifteen of a structured-field
// Integer.
const neverSeconds = int64(client.Never/time.Second) + 1

// wholeSeconds is d in whole seconds rounded up, at least one.
func wholeSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return max(s, 1)
}

// ceilSeconds is d in whole seconds rounded up, between 1 and
// client.MaxRetryAfter: a Retry-After.
func ceilSeconds(d time.Duration) int {
	if d > (client.MaxRetryAfter-1)*time.Second {
		return client.MaxRetryAfter
	}
	return max(1, int((d+time.Second-1)/time.Second))
}
