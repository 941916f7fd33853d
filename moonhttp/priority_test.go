package moonhttp_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moonhttp"
)

// names are the priority names, each with its priority.
var names = map[string]client.Priority{
	"low":      client.PriorityLow,
	"normal":   client.PriorityNormal,
	"high":     client.PriorityHigh,
	"critical": client.PriorityCritical,
}

// headerValue is the priority HeaderPriority reads from a request whose
// priority header is v.
func headerValue(v string) client.Priority {
	r, _ := http.NewRequest("GET", "/", nil)
	r.Header.Set(moonhttp.PriorityHeader, v)
	return moonhttp.HeaderPriority("")(r)
}

// TestHeaderPriorityValues: the names in any case and with spaces around
// them, and PriorityNormal for anything else.
func TestHeaderPriorityValues(t *testing.T) {
	tests := []struct {
		in   string
		want client.Priority
	}{
		{"low", client.PriorityLow},
		{"high", client.PriorityHigh},
		{"critical", client.PriorityCritical},
		{"normal", client.PriorityNormal},
		{"Critical", client.PriorityCritical},
		{"\t HIGH ", client.PriorityHigh},
		{"", client.PriorityNormal},
		{"urgent", client.PriorityNormal},
		{"2", client.PriorityNormal},
		{"high, low", client.PriorityNormal},
		{"hi gh", client.PriorityNormal},
	}
	for _, tc := range tests {
		if got := headerValue(tc.in); got != tc.want {
			t.Errorf("header %q reads as %v, want %v", tc.in, got, tc.want)
		}
	}
}

// FuzzHeaderPriority: any header value reads as one of the four
// priorities, never another number; a value other than PriorityNormal
// comes only from that priority's name, in some case, with spaces around
// it; and HeaderPriority reads the first value of its header.
func FuzzHeaderPriority(f *testing.F) {
	for _, s := range []string{"", "low", "normal", "high", "critical", " High\t", "CRITICAL", "lo", "critical!", "\x00", "ｈigh", "hıgh", "K", "cRiTiCaL "} {
		f.Add(s, "")
		f.Add(s, "low")
	}
	read := moonhttp.HeaderPriority("")
	f.Fuzz(func(t *testing.T, v, second string) {
		p := headerValue(v)
		if p < client.PriorityLow || p > client.PriorityCritical {
			t.Fatalf("header %q reads as %d, outside the priorities", v, p)
		}
		trimmed := strings.TrimSpace(v)
		if p != client.PriorityNormal && !strings.EqualFold(trimmed, p.String()) {
			t.Fatalf("header %q reads as %v, from a value that is not its name", v, p)
		}
		if want, ok := names[strings.ToLower(trimmed)]; ok && strings.EqualFold(trimmed, want.String()) && p != want {
			t.Fatalf("header %q reads as %v, want %v", v, p, want)
		}
		if q := headerValue(p.String()); q != p {
			t.Fatalf("%v reads back as %v", p, q)
		}
		r, _ := http.NewRequest("GET", "/", nil)
		r.Header.Add(moonhttp.PriorityHeader, v)
		r.Header.Add(moonhttp.PriorityHeader, second)
		if got := read(r); got != p {
			t.Fatalf("header %q then %q reads as %v, want the first's %v", v, second, got, p)
		}
	})
}
