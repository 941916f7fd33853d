package moonhttp_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moonhttp"
)

// TestParseRetryAfter: both forms of the field, the three date formats
// RFC 9110 lets a recipient accept, and the malformed values a client must
// treat as absent.
func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"0", 0, true},
		{"1", time.Second, true},
		{"120", 2 * time.Minute, true},
		{" 7\t", 7 * time.Second, true},
		{"00042", 42 * time.Second, true},
		{"99999999999999999999", client.Never, true},
		{"Sun, 01 Mar 2026 12:00:05 GMT", 5 * time.Second, true}, // IMF-fixdate
		{"Sunday, 01-Mar-26 12:01:00 GMT", time.Minute, true},    // RFC 850
		{"Sun Mar  1 12:00:30 2026", 30 * time.Second, true},     // asctime
		{"Sun, 01 Mar 2026 11:59:00 GMT", 0, true},               // passed
		{"", 0, false},
		{" ", 0, false},
		{"-1", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"5 s", 0, false},
		{"tomorrow", 0, false},
		{"2026-03-01T12:00:05Z", 0, false},
	}
	for _, tc := range tests {
		got, ok := moonhttp.ParseRetryAfter(tc.value, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.value, got, ok, tc.want, tc.ok)
		}
	}
}

// TestRetryAfterDate: an HTTP-date is read against the response's own
// Date, so the span does not depend on how far the two clocks disagree.
func TestRetryAfterDate(t *testing.T) {
	resp := &http.Response{Header: http.Header{}}
	resp.Header.Set("Date", "Sun, 06 Nov 1994 08:49:37 GMT")
	resp.Header.Set("Retry-After", "Sun, 06 Nov 1994 08:49:47 GMT")
	if d, ok := moonhttp.RetryAfter(resp); d != 10*time.Second || !ok {
		t.Fatalf("RetryAfter = %v, %v; want 10s, true", d, ok)
	}
	resp.Header.Del("Date") // against the local clock: long past
	if d, ok := moonhttp.RetryAfter(resp); d != 0 || !ok {
		t.Fatalf("without Date: %v, %v; want 0, true", d, ok)
	}
	resp.Header.Del("Retry-After")
	if _, ok := moonhttp.RetryAfter(resp); ok {
		t.Fatal("no Retry-After read as one")
	}
	if _, ok := moonhttp.RetryAfter(nil); ok {
		t.Fatal("a nil response read as a Retry-After")
	}
}
