package moonhttp

import (
	"net/http"
	"net/netip"
	"strings"
)

// KeyFunc names the quota a request is counted against: a client address,
// an API key, a tenant. Every request with the same key shares one quota;
// the empty key is a key like any other, so requests that have none (no
// API key header, say) share one quota between them rather than escaping
// the limit.
//
// Key by something the client cannot make up freely: a made-up API key is
// a fresh quota. Check the key is real before the limit runs, or key by
// ClientIP.
type KeyFunc func(r *http.Request) string

// Header keys requests by the value of the header name, such as an API key
// ("X-API-Key"); requests without it share the empty key.
func Header(name string) KeyFunc {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) string { return r.Header.Get(name) }
}

// ClientIP keys requests by the address of the client, read from the
// X-Forwarded-For header as far as the trusted proxies vouch for it.
//
// The peer (http.Request.RemoteAddr) is the client unless it lies in one of
// the trusted prefixes. A trusted peer is a proxy, and the last entry of
// X-Forwarded-For is the address it received the request from; that one is
// the client unless it too is trusted, and so on leftwards. The walk stops
// at the first address no trusted prefix holds: everything left of it was
// written by the client or by proxies nobody vouches for, and is ignored,
// which is what stops a client from choosing its own key by sending the
// header itself. An entry that does not parse ends the walk at the proxy
// that wrote it, and a trusted proxy that sent no header is the key itself,
// so the clients behind it share one quota. With no trusted prefixes the
// header is never read.
//
// IPv6 clients are keyed by their /64, since one host is commonly given a
// whole /64 and could otherwise take a fresh quota per address;
// IPv4-mapped IPv6 addresses count as IPv4, and zones are dropped. A
// RemoteAddr that is not an address (a Unix socket's) is the key as it is.
//
// Trust only proxies that append to X-Forwarded-For (most do). For proxies
// that write the Forwarded header instead, use ForwardedClientIP: a server
// must read the one header its proxies write, since a client can send the
// other.
func ClientIP(trusted ...netip.Prefix) KeyFunc {
	tr := masked(trusted)
	return func(r *http.Request) string { return clientKey(r, tr, forwardedForHops) }
}

// ForwardedClientIP is ClientIP reading the standard Forwarded header
// (RFC 7239) instead of X-Forwarded-For: the "for" parameter of each
// element, walked from the last element leftwards under the same rule. A
// "for" that names no address ("unknown", an obfuscated name such as
// "_hidden") ends the walk like an entry that does not parse. So does a
// header line with a quoted string that never closes. A client's stray
// quote would otherwise swallow what a proxy appends to that line, and let
// the client's own "for" stand in for the proxy's.
func ForwardedClientIP(trusted ...netip.Prefix) KeyFunc {
	tr := masked(trusted)
	return func(r *http.Request) string { return clientKey(r, tr, forwardedHops) }
}

// masked copies the prefixes with their host bits cleared, dropping
// invalid ones, so a prefix written as 10.1.2.3/8 holds all of 10/8.
func masked(prefixes []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(prefixes))
	for _, p := range prefixes {
		if p.IsValid() {
			out = append(out, p.Masked())
		}
	}
	return out
}

// clientKey walks from the peer through the hops hops returns (the header's
// entries, nearest last) while each address is trusted, and returns the
// first one that is not, as a key.
func clientKey(r *http.Request, trusted []netip.Prefix, hops func(http.Header) []string) string {
	hop, ok := parseHost(r.RemoteAddr)
	if !ok {
		return r.RemoteAddr
	}
	if len(trusted) == 0 || !holds(trusted, hop) {
		return keyOf(hop)
	}
	entries := hops(r.Header)
	for i := len(entries) - 1; i >= 0; i-- {
		next, ok := parseHost(entries[i])
		if !ok {
			break // the proxy at hop wrote something we cannot read
		}
		hop = next
		if !holds(trusted, hop) {
			break
		}
	}
	return keyOf(hop)
}

func holds(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// keyOf is the key for a client address: the address for IPv4, its /64 for
// IPv6.
func keyOf(a netip.Addr) string {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// parseHost reads an address, with or without a port, IPv6 with or without
// brackets, unmapped and without its zone.
func parseHost(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, perr := netip.ParseAddrPort(s)
		if perr != nil {
			// A bracketed IPv6 without a port, as Forwarded writes it.
			if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
				return netip.Addr{}, false
			}
			if a, err = netip.ParseAddr(s[1 : len(s)-1]); err != nil {
				return netip.Addr{}, false
			}
		} else {
			a = ap.Addr()
		}
	}
	return a.Unmap().WithZone(""), true
}

// forwardedForHops is every X-Forwarded-For entry, in order, across all the
// header's lines.
func forwardedForHops(h http.Header) []string {
	var out []string
	for _, line := range h.Values("X-Forwarded-For") {
		for e := range strings.SplitSeq(line, ",") {
			out = append(out, e)
		}
	}
	return out
}

// forwardedHops is the "for" node of every Forwarded element, in order; an
// element without one gives "", which no address parses from. A line whose
// quotes do not close gives one "": where its elements end is unknown.
func forwardedHops(h http.Header) []string {
	var out []string
	for _, line := range h.Values("Forwarded") {
		elems, closed := splitQuoted(line, ',')
		if !closed {
			out = append(out, "")
			continue
		}
		for _, elem := range elems {
			node := ""
			pairs, _ := splitQuoted(elem, ';') // an element of a closed line closes
			for _, pair := range pairs {
				k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(k, "for") {
					node = unquote(v)
				}
			}
			out = append(out, node)
		}
	}
	return out
}

// splitQuoted splits s at sep outside double-quoted strings. closed is
// false when s ends inside one.
func splitQuoted(s string, sep byte) (parts []string, closed bool) {
	quoted, escaped, start := false, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:]), !quoted
}

// unquote strips a quoted-string's quotes and escapes; a token is returned
// as it is.
func unquote(v string) string {
	v = strings.TrimSpace(v)
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return v
	}
	var b strings.Builder
	for i := 1; i < len(v)-1; i++ {
		if v[i] == '\\' && i+1 < len(v)-1 {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
