package moonhttp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// Rejection is what a refused request is to be told. The headers (Retry-After,
// and for a quota the RateLimit fields) are already set on the response when
// a RejectFunc sees it; the status and body are the RejectFunc's to write.
type Rejection struct {
	// Status is 429 (http.StatusTooManyRequests) for a quota, 503
	// (http.StatusServiceUnavailable) for a full gate, a pool's refusal or
	// a limiter closed with the server.
	Status int
	// RetryAfter is the Retry-After the response carries, in whole seconds:
	// at least 1, at most client.MaxRetryAfter.
	RetryAfter int
	// Policy is the name of the quota that refused, for a 429; "" otherwise.
	Policy string
}

// RejectFunc writes the status and body of a refused request. The default is
// WriteProblem; WithReject sets another.
type RejectFunc func(w http.ResponseWriter, r *http.Request, rej Rejection)

// Problem types from draft-ietf-httpapi-ratelimit-headers (revision 11,
// section 5), which asks IANA to register them. Until then they are what
// the draft names, and a client that does not know them still has the
// status code.
const (
	// ProblemQuotaExceeded is the type of WriteProblem's 429 body.
	ProblemQuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	// ProblemReducedCapacity is the type of WriteProblem's 503 body.
	ProblemReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
)

// problem is an RFC 9457 problem details object with the draft's extension
// member.
type problem struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail"`
	Violated []string `json:"violated-policies,omitempty"`
}

// WriteProblem is the default RejectFunc: it writes rej.Status with a small
// application/problem+json body (RFC 9457) saying when to come back. A 429's
// type is ProblemQuotaExceeded and names the policy in "violated-policies";
// a 503's is ProblemReducedCapacity; any other status gets RFC 9457's
// default type, about:blank, titled with the status text. A HEAD gets the
// headers alone. It does not block beyond the write.
func WriteProblem(w http.ResponseWriter, r *http.Request, rej Rejection) {
	p := problem{Status: rej.Status, Detail: fmt.Sprintf("retry after %d s", rej.RetryAfter)}
	switch rej.Status {
	case http.StatusTooManyRequests:
		p.Type, p.Title = ProblemQuotaExceeded, "Quota exceeded"
		if rej.Policy != "" {
			p.Violated = []string{rej.Policy}
		}
	case http.StatusServiceUnavailable:
		p.Type, p.Title = ProblemReducedCapacity, "Over capacity for now"
	default:
		p.Type, p.Title = "about:blank", http.StatusText(rej.Status)
	}
	body, err := json.Marshal(p)
	if err != nil { // cannot happen for these fields; say the status at least
		http.Error(w, http.StatusText(rej.Status), rej.Status)
		return
	}
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store") // the answer is for this instant only
	w.WriteHeader(rej.Status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// reject sets Retry-After and hands the rest to the RejectFunc.
func reject(w http.ResponseWriter, r *http.Request, f RejectFunc, rej Rejection) {
	w.Header().Set("Retry-After", strconv.Itoa(rej.RetryAfter))
	f(w, r, rej)
}
