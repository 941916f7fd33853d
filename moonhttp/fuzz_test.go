package moonhttp_test

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moonhttp"
)

// The fuzz targets read what a client sends as an attacker would write it.
// Each f.Add is a seed that runs in every go test; scripts/fuzz runs them
// as fuzzers.

// proxyNets are the trusted proxies of the forwarding targets.
var proxyNets = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}

// fuzzAddr makes an address from bits: in the proxies' networks if
// trusted, outside them otherwise; IPv6 if v6.
func fuzzAddr(bits uint64, v6, trusted bool) netip.Addr {
	if v6 {
		var b [16]byte
		for i := range 8 {
			b[8+i] = byte(bits >> (8 * i))
		}
		b[0], b[1] = 0x20, 0x01 // 2001::/16
		if trusted {
			b[0], b[1] = 0xfd, byte(bits>>56)
		}
		return netip.AddrFrom16(b)
	}
	b := [4]byte{byte(bits), byte(bits >> 8), byte(bits >> 16), byte(bits >> 24)}
	if trusted {
		b[0] = 10
	} else if b[0] == 10 || b[0] == 0 {
		b[0] = 198
	}
	return netip.AddrFrom4(b)
}

// peerKey is the key ClientIP gives a request whose peer is a, with no
// header and nobody trusted: how the package keys that address itself.
func peerKey(a netip.Addr) string {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = netip.AddrPortFrom(a, 443).String()
	return moonhttp.ClientIP()(r)
}

// hopText writes a as a proxy would put it in the header: X-Forwarded-For
// bare (with a port if port), Forwarded as a "for" node, quoted when it
// must be (an IPv6 address, or a port).
func hopText(a netip.Addr, forwarded, port bool) string {
	s := a.String()
	if port {
		s = netip.AddrPortFrom(a, 8080).String()
	}
	if !forwarded {
		return s
	}
	if a.Is6() && !port {
		s = "[" + s + "]"
	}
	if a.Is6() || port {
		s = `"` + s + `"`
	}
	return "for=" + s
}

// FuzzClientIP: whatever a client writes into X-Forwarded-For or Forwarded,
// the key is never an address it chose. The client's text is followed by
// what the trusted proxies add: the address they received the request from
// (untrusted, the real client) and their own. The key must be that real
// client's, or, where the client's text leaves the proxies' part unreadable,
// one of the trusted proxies'. Nobody trusted, or an untrusted peer, and
// the header is not read at all.
func FuzzClientIP(f *testing.F) {
	f.Add("6.6.6.6", uint64(0x0102030405060708), uint8(1), uint8(0))
	f.Add("6.6.6.6, 7.7.7.7\n8.8.8.8", uint64(42), uint8(3), uint8(0x0f))
	f.Add(`for=6.6.6.6;x="`, uint64(7), uint8(1), uint8(0x30))
	f.Add(`for="[2001:db8::1]";proto=https, for=unknown`, uint64(99), uint8(2), uint8(0x13))
	f.Add(`for=6.6.6.6, for="_hidden`, uint64(5), uint8(0), uint8(0x30))
	f.Add("\"\\\n,;=\"", uint64(1<<63), uint8(4), uint8(0xff))
	f.Add("", uint64(0), uint8(0), uint8(0x04))
	f.Fuzz(func(t *testing.T, text string, bits uint64, hops uint8, form uint8) {
		forwarded := form&0x10 != 0 // Forwarded, or X-Forwarded-For
		sameLine := form&0x20 != 0  // the proxies append to the client's last line
		v6 := form&0x01 != 0
		name, key := "X-Forwarded-For", moonhttp.ClientIP(proxyNets...)
		if forwarded {
			name, key = "Forwarded", moonhttp.ForwardedClientIP(proxyNets...)
		}
		real := fuzzAddr(bits, v6, false)
		trustedKeys := map[string]bool{}
		hops = hops % 4
		var added []string
		added = append(added, hopText(real, forwarded, form&0x02 != 0))
		proxies := make([]netip.Addr, 0, int(hops)+1)
		for i := range int(hops) + 1 {
			p := fuzzAddr(bits^uint64(i+1)*0x9e3779b97f4a7c15, bits>>(60+i)&1 != 0, true)
			proxies = append(proxies, p)
			trustedKeys[peerKey(p)] = true
		}
		for _, p := range proxies[:hops] {
			added = append(added, hopText(p, forwarded, form&0x08 != 0))
		}
		lines := strings.Split(text, "\n")
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = netip.AddrPortFrom(proxies[hops], 443).String()
		for i, l := range lines {
			if sameLine && i == len(lines)-1 {
				l += ", " + strings.Join(added, ", ")
			}
			r.Header.Add(name, l)
		}
		if !sameLine {
			for _, a := range added {
				r.Header.Add(name, a)
			}
		}
		got := key(r)
		want := peerKey(real)
		readable := !forwarded || !sameLine || balanced(lines[len(lines)-1])
		if readable && got != want || !readable && got != want && !trustedKeys[got] {
			t.Fatalf("%s %q behind %v: key %q, want the real client's %q", name, r.Header.Values(name), r.RemoteAddr, got, want)
		}

		// Nobody trusted, or an untrusted peer: the header is never read.
		if got, want := moonhttp.ClientIP()(r), peerKey(proxies[hops]); got != want {
			t.Fatalf("nobody trusted: key %q, want the peer's %q", got, want)
		}
		r.RemoteAddr = netip.AddrPortFrom(real, 443).String()
		if got := key(r); got != want {
			t.Fatalf("an untrusted peer: key %q, want the peer's %q", got, want)
		}
		r.RemoteAddr = text
		_ = key(r) // any RemoteAddr at all: no panic
	})
}

// balanced says whether s closes every quoted string it opens, as
// RFC 7239's quoted-string reads it: a proxy that appends to such a line
// appends outside any quotes.
func balanced(s string) bool {
	quoted, escaped := false, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		}
	}
	return !quoted
}

// FuzzParseRetryAfter: any value parses without a panic to a wait of zero
// or more; delay-seconds read exactly; and what a server writes, in either
// form, reads back as the wait it meant.
func FuzzParseRetryAfter(f *testing.F) {
	f.Add("120", int64(1_700_000_000), int64(0), int64(5))
	f.Add("Sun, 06 Nov 1994 08:49:37 GMT", int64(784_111_777), int64(999), int64(-3))
	f.Add("Sun Nov  6 08:49:37 1994", int64(784_111_000), int64(1), int64(86_400))
	f.Add("99999999999999999999", int64(0), int64(0), int64(0))
	f.Add(" \t", int64(-1), int64(-1), int64(-1))
	f.Add("Sunday, 06-Nov-94 08:49:37 GMT", int64(1<<40), int64(1<<30), int64(1<<40))
	f.Fuzz(func(t *testing.T, value string, sec, nsec, delta int64) {
		now := time.Unix(sec%(1<<36), nsec%1e9)
		wait, ok := moonhttp.ParseRetryAfter(value, now)
		if wait < 0 || !ok && wait != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v; want a wait of zero or more, and 0 when not ok", value, wait, ok)
		}
		if v := strings.Trim(value, " \t"); v != "" && strings.Trim(v, "0123456789") == "" {
			want := client.Never
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n <= int64(client.Never/time.Second) {
				want = time.Duration(n) * time.Second
			}
			if !ok || wait != want {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v", value, wait, ok, want)
			}
		}

		// What a server writes reads back.
		secs := delta % (1 << 33)
		s := strconv.FormatInt(max(secs, 0), 10)
		if wait, ok := moonhttp.ParseRetryAfter(s, now); !ok || wait != time.Duration(max(secs, 0))*time.Second {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %ss", s, wait, ok, s)
		}
		at := time.Unix(now.Unix()+secs, 0).UTC()
		if at.Year() < 1 || at.Year() > 9999 {
			return // not an HTTP-date
		}
		want := max(at.Sub(now), 0)
		for _, layout := range []string{http.TimeFormat, time.ANSIC} {
			s := at.Format(layout)
			if wait, ok := moonhttp.ParseRetryAfter(s, now); !ok || wait != want {
				t.Fatalf("ParseRetryAfter(%q) at %v = %v, %v; want %v", s, now, wait, ok, want)
			}
		}
	})
}

// FuzzRateLimitFields: for any policy and answer, the RateLimit-Policy and
// RateLimit fields are well-formed structured fields (RFC 8941), and read
// back to the numbers they were written from: the name, q, w, r and t, and
// t agrees with Retry-After. A closed limiter's answer (kind&4 set) gets
// 503 and none.
func FuzzRateLimitFields(f *testing.F) {
	f.Add("default", uint8(0), 20, int64(2*time.Second), 10.0, 20.0, true, int64(0), 19)
	f.Add(`a"b\c`+"\n\xff", uint8(1), 3, int64(48*time.Hour), 0.0, 0.0, false, int64(time.Hour), 0)
	f.Add("", uint8(2), math.MaxInt, int64(1), 1e-12, 1e18, false, int64(client.Never), -5)
	f.Add("x", uint8(0), 0, int64(0), math.Inf(1), math.NaN(), true, int64(-1), math.MaxInt)
	f.Add("per-minute", uint8(1), 2, int64(time.Minute), 0.0, 0.0, false, int64(40*time.Second), 0)
	f.Add("", uint8(0), 0, int64(0), 1e-300, 1e300, false, int64(client.Never), 1)
	f.Add("closed", uint8(4), 0, int64(0), 1.0, 5.0, false, int64(client.Never), 0)
	f.Add("closed window", uint8(5), 10, int64(time.Minute), 0.0, 0.0, false, int64(client.Never), 3)
	f.Fuzz(func(t *testing.T, name string, kind uint8, quota int, window int64, rate, burst float64, ok bool, wait int64, left int) {
		var p moonhttp.Policy
		switch kind % 3 {
		case 0:
			p = moonhttp.BucketPolicy(rate, burst)
		case 1:
			p = moonhttp.WindowPolicy(quota, time.Duration(window))
		default:
			p = moonhttp.Policy{Quota: quota, Window: time.Duration(window)}
		}
		p.Name = name
		d := client.Decision{OK: ok, Left: left}
		if !ok {
			d.Wait = max(time.Duration(wait), 1)
			d.Closed = kind&4 != 0
		}
		w := httptest.NewRecorder()
		moonhttp.Limit(fixed(d), p, moonhttp.WithLegacyHeaders())(ok200).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		h := w.Header()
		if d.Closed {
			if w.Code != 503 || h.Get("Retry-After") != "1" || h.Get("RateLimit") != "" || h.Get("RateLimit-Policy") != "" {
				t.Fatalf("closed: %d, Retry-After %q, RateLimit %q; want 503, 1 and no fields", w.Code, h.Get("Retry-After"), h.Get("RateLimit"))
			}
			return
		}
		if want := map[bool]int{true: 200, false: 429}[ok]; w.Code != want {
			t.Fatalf("status %d, want %d", w.Code, want)
		}
		pol, err := parseItem(h.Get("RateLimit-Policy"))
		if err != nil {
			t.Fatalf("RateLimit-Policy %q: %v", h.Get("RateLimit-Policy"), err)
		}
		rl, err := parseItem(h.Get("RateLimit"))
		if err != nil {
			t.Fatalf("RateLimit %q: %v", h.Get("RateLimit"), err)
		}
		wantName := sanitized(name)
		if pol.name != wantName || rl.name != wantName {
			t.Fatalf("names %q and %q, want %q", pol.name, rl.name, wantName)
		}
		q, hasQ := pol.params["q"]
		wantQ := min(int64(max(p.Quota, 0)), maxInteger)
		if !hasQ || q != wantQ {
			t.Fatalf("q=%d (%v), want %d", q, hasQ, wantQ)
		}
		wv, hasW := pol.params["w"]
		if hasW != (p.Window > 0) || hasW && wv != ceilSecs(p.Window) {
			t.Fatalf("w=%d (%v), want %d from a window of %v", wv, hasW, ceilSecs(p.Window), p.Window)
		}
		if len(pol.params) != 1+map[bool]int{true: 1}[hasW] {
			t.Fatalf("RateLimit-Policy %q: parameters other than q and w", h.Get("RateLimit-Policy"))
		}
		r, hasR := rl.params["r"]
		if !hasR || r != min(int64(max(left, 0)), q) {
			t.Fatalf("r=%d (%v), want %d", r, hasR, min(int64(max(left, 0)), q))
		}
		tv, hasT := rl.params["t"]
		if !ok {
			ra := h.Get("Retry-After")
			if !hasT || strconv.FormatInt(tv, 10) != ra || ra != strconv.Itoa(d.RetryAfter()) {
				t.Fatalf("refused: t=%d (%v), Retry-After %q; want both %d", tv, hasT, ra, d.RetryAfter())
			}
		}
		if kind%3 != 0 && ok && (hasT != hasW || hasT && tv != wv) {
			t.Fatalf("a window's allowed answer: t=%d (%v), want w=%d (%v)", tv, hasT, wv, hasW)
		}
		legacy := []string{h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset")}
		want := []string{strconv.FormatInt(q, 10), strconv.FormatInt(r, 10), ""}
		if hasT {
			want[2] = strconv.FormatInt(tv, 10)
		}
		if fmt.Sprint(legacy) != fmt.Sprint(want) {
			t.Fatalf("legacy fields %q, want %q", legacy, want)
		}
	})
}

// ok200 answers 200 with nothing.
var ok200 = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

// maxInteger is the largest structured-field Integer: fifteen digits.
const maxInteger = 999_999_999_999_999

// ceilSecs is d in whole seconds, rounded up.
func ceilSecs(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// sanitized is a policy name as the fields carry it: "default" for none,
// and '?' for each byte a structured-field String cannot hold.
func sanitized(name string) string {
	if name == "" {
		return "default"
	}
	b := []byte(name)
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	return string(b)
}

// item is a structured-field List of one Item whose bare item is a String
// and whose parameters are Integers: what both RateLimit fields are.
type item struct {
	name   string
	params map[string]int64
}

// parseItem reads such a field strictly, by RFC 8941's grammar (sections
// 4.2.1, 4.2.3, 4.2.4, 4.2.5): a sender that strays is caught, not read
// kindly.
func parseItem(s string) (item, error) {
	it := item{params: map[string]int64{}}
	if len(s) == 0 || s[0] != '"' {
		return it, fmt.Errorf("no String at %q", s)
	}
	var b strings.Builder
	i := 1
	for ; ; i++ {
		if i >= len(s) {
			return it, fmt.Errorf("unterminated String")
		}
		c := s[i]
		if c == '"' {
			i++
			break
		}
		if c == '\\' {
			i++
			if i >= len(s) || s[i] != '"' && s[i] != '\\' {
				return it, fmt.Errorf("bad escape at %d", i)
			}
			c = s[i]
		} else if c < 0x20 || c > 0x7e {
			return it, fmt.Errorf("byte %#x in a String", c)
		}
		b.WriteByte(c)
	}
	it.name = b.String()
	for i < len(s) {
		if s[i] != ';' {
			return it, fmt.Errorf("%q after the item: one member only", s[i:])
		}
		i++
		for i < len(s) && s[i] == ' ' {
			i++
		}
		j := i
		for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || j > i && (s[j] >= '0' && s[j] <= '9' || strings.IndexByte("_-.*", s[j]) >= 0)) {
			j++
		}
		if j == i || j >= len(s) || s[j] != '=' {
			return it, fmt.Errorf("bad parameter at %q", s[i:])
		}
		key := s[i:j]
		j++
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k == j || k-j > 15 {
			return it, fmt.Errorf("parameter %s=%q is not a non-negative Integer of at most 15 digits", key, s[j:k])
		}
		n, _ := strconv.ParseInt(s[j:k], 10, 64)
		if _, dup := it.params[key]; dup {
			return it, fmt.Errorf("parameter %s twice", key)
		}
		it.params[key] = n
		i = k
	}
	return it, nil
}
