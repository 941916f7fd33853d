package moonhttp

import (
	"net/http"
	"strings"
	"time"

	"github.com/moonpool-go/moonpool/client"
)

// ParseRetryAfter reads a Retry-After field value (RFC 9110, section
// 10.2.3) as a wait from now: delay-seconds ("120") as they are, an
// HTTP-date ("Fri, 31 Dec 1999 23:59:59 GMT", or either obsolete form) as
// the time from now until then, 0 if it has passed. ok is false for an
// empty or malformed value, which a client should treat as absent. A
// number of seconds too large for a time.Duration reads as client.Never.
//
// now should be the server's clock, from the response's Date field, when
// there is one: the date was written by that clock, so the span does not
// take in the skew between the two machines. RetryAfter does that.
func ParseRetryAfter(value string, now time.Time) (wait time.Duration, ok bool) {
	v := strings.Trim(value, " \t")
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		const most = int64(client.Never / time.Second)
		var s int64
		for i := 0; i < len(v); i++ {
			s = s*10 + int64(v[i]-'0')
			if s > most {
				return client.Never, true
			}
		}
		return time.Duration(s) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(at.Sub(now), 0), true
}

// RetryAfter is the wait resp's Retry-After field asks for, read by
// ParseRetryAfter against the response's Date field, or the local clock
// when it has none; ok is false when the field is absent or malformed.
func RetryAfter(resp *http.Response) (time.Duration, bool) {
	if resp == nil {
		return 0, false
	}
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	now, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		now = time.Now()
	}
	return ParseRetryAfter(v, now)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
