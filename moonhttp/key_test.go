package moonhttp_test

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/moonpool-go/moonpool/moonhttp"
)

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// TestClientIP: the key is the nearest address no trusted proxy vouches
// for, so a client cannot choose its own key by sending the header.
func TestClientIP(t *testing.T) {
	proxies := prefixes("10.0.0.0/8", "192.168.1.1/32")
	tests := []struct {
		name    string
		remote  string
		xff     []string // X-Forwarded-For lines
		trusted []netip.Prefix
		want    string
	}{
		{"no header", "203.0.113.7:5555", nil, proxies, "203.0.113.7"},
		{"untrusted peer: header ignored", "203.0.113.7:5555", []string{"198.51.100.1"}, proxies, "203.0.113.7"},
		{"nobody trusted: header ignored", "10.0.0.1:80", []string{"198.51.100.1"}, nil, "10.0.0.1"},
		{"one proxy", "10.0.0.1:80", []string{"198.51.100.1"}, proxies, "198.51.100.1"},
		{"spoofed entry left of the client", "10.0.0.1:80", []string{"6.6.6.6, 198.51.100.1"}, proxies, "198.51.100.1"},
		{"two proxies", "10.0.0.1:80", []string{"198.51.100.1, 10.9.9.9"}, proxies, "198.51.100.1"},
		{"lines joined in order", "10.0.0.1:80", []string{"6.6.6.6", "198.51.100.1", "192.168.1.1"}, proxies, "198.51.100.1"},
		{"host bits in a prefix", "10.0.0.1:80", []string{"198.51.100.1"}, prefixes("10.1.2.3/8"), "198.51.100.1"},
		{"all trusted: the furthest", "10.0.0.1:80", []string{"10.0.0.3, 10.0.0.2"}, proxies, "10.0.0.3"},
		{"garbage ends the walk at its writer", "10.0.0.1:80", []string{"198.51.100.1, bogus"}, proxies, "10.0.0.1"},
		{"empty entry ends the walk", "10.0.0.1:80", []string{"198.51.100.1, "}, proxies, "10.0.0.1"},
		{"entry with a port", "10.0.0.1:80", []string{"198.51.100.1:4711"}, proxies, "198.51.100.1"},
		{"IPv6 keyed by its /64", "[2001:db8:1:2::99]:443", nil, proxies, "2001:db8:1:2::/64"},
		{"IPv6 client behind a proxy", "10.0.0.1:80", []string{"[2001:db8:1:2:3::4]:80"}, proxies, "2001:db8:1:2::/64"},
		{"IPv4-mapped counts as IPv4", "[::ffff:203.0.113.7]:80", nil, proxies, "203.0.113.7"},
		{"mapped proxy is trusted", "[::ffff:10.0.0.1]:80", []string{"198.51.100.1"}, proxies, "198.51.100.1"},
		{"zone dropped", "[fe80::1%eth0]:80", nil, nil, "fe80::/64"},
		{"not an address", "@", nil, proxies, "@"},
	}
	for _, tc := range tests {
		r, _ := http.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.remote
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := moonhttp.ClientIP(tc.trusted...)(r); got != tc.want {
			t.Errorf("%s: key %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestForwardedClientIP: the same walk over RFC 7239's Forwarded field,
// with its quoting, and without reading X-Forwarded-For at all.
func TestForwardedClientIP(t *testing.T) {
	proxies := prefixes("10.0.0.0/8")
	tests := []struct {
		name string
		fwd  []string
		xff  string
		want string
	}{
		{"one element", []string{"for=198.51.100.1;proto=https"}, "", "198.51.100.1"},
		{"case and spaces", []string{"proto=http; FOR=198.51.100.1 ;by=10.0.0.1"}, "", "198.51.100.1"},
		{"quoted IPv6 with port", []string{`for="[2001:db8:cafe::17]:4711"`}, "", "2001:db8:cafe::/64"},
		{"quoted IPv6 without port", []string{`for="[2001:db8:cafe::17]"`}, "", "2001:db8:cafe::/64"},
		{"spoofed left element", []string{"for=6.6.6.6, for=198.51.100.1"}, "", "198.51.100.1"},
		{"through a trusted proxy", []string{"for=198.51.100.1, for=10.2.2.2"}, "", "198.51.100.1"},
		{"a quoted comma does not split", []string{`for=6.6.6.6;x="a,b", for=198.51.100.1`}, "", "198.51.100.1"},
		{"unknown ends the walk", []string{"for=198.51.100.1, for=unknown"}, "", "10.0.0.1"},
		{"obfuscated ends the walk", []string{`for=198.51.100.1, for="_hidden"`}, "", "10.0.0.1"},
		{"element without for ends the walk", []string{"for=198.51.100.1, proto=http"}, "", "10.0.0.1"},
		{"a quote left open swallows the proxy's element", []string{`for=6.6.6.6;x=", for=198.51.100.1`}, "", "10.0.0.1"},
		{"a line left open ends the walk there", []string{"for=198.51.100.1", `for=6.6.6.6;x="`, "for=10.3.3.3"}, "", "10.3.3.3"},
		{"X-Forwarded-For is not read", nil, "198.51.100.1", "10.0.0.1"},
	}
	for _, tc := range tests {
		r, _ := http.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.0.0.1:80"
		for _, v := range tc.fwd {
			r.Header.Add("Forwarded", v)
		}
		if tc.xff != "" {
			r.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := moonhttp.ForwardedClientIP(proxies...)(r); got != tc.want {
			t.Errorf("%s: key %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestHeaderKey: the header's value, any spelling of its name; none is the
// empty key, which is a quota like any other.
func TestHeaderKey(t *testing.T) {
	r, _ := http.NewRequest("GET", "/", nil)
	key := moonhttp.Header("x-api-key")
	if got := key(r); got != "" {
		t.Fatalf("no header: key %q, want empty", got)
	}
	r.Header.Set("X-Api-Key", "k1")
	if got := key(r); got != "k1" {
		t.Fatalf("key %q, want k1", got)
	}
}
