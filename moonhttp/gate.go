package moonhttp

import (
	"net/http"

	"github.com/moonpool-go/moonpool/client"
)

// Concurrency is middleware that lets at most the gate's limit of requests
// run next at once, across all clients: the limit a server puts on itself
// so that a surge queues nowhere inside it. A request that finds the gate
// full is refused at once, never queued, with 503 Service Unavailable,
// Retry-After: 1 and a problem+json body (WriteProblem, or WithReject's).
// A second is the least the header can say: the gate is full for this
// instant's load, and a request or two finishing frees it. WithKey and
// WithLegacyHeaders do not apply.
//
// The room is given back when next returns, also when it panics. Once g is
// closed every request is refused. A nil g refuses nothing.
func Concurrency(g *client.Gate, opts ...Option) func(http.Handler) http.Handler {
	s := newSettings(opts)
	return func(next http.Handler) http.Handler {
		if g == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !g.Enter() {
				reject(w, r, s.reject, Rejection{Status: http.StatusServiceUnavailable, RetryAfter: 1})
				return
			}
			defer g.Leave()
			next.ServeHTTP(w, r)
		})
	}
}
