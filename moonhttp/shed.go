package moonhttp

import (
	"errors"
	"net/http"

	"github.com/moonpool-go/moonpool/client"
)

// Unavailable answers a request that its pool refused, and reports whether
// it did. When err is one of client.Pool.Get's refusals it writes 503
// Service Unavailable with Retry-After and a problem+json body (WriteProblem,
// or WithReject's) and returns true:
//   - an error matching client.ErrShed: the ward's shedder found the
//     process overloaded (ErrOverloaded), its breaker refuses opens to a
//     failing backend (ErrBreaker), or MaxWaiting callers were already in
//     line (ErrTooManyWaiting). Retry-After: 1, the least the header can
//     say: the refusal is about this instant's load.
//   - a *client.WaitError: the ward holds opens back past the request's
//     deadline. Retry-After is the rest of the hold, rounded up.
//   - client.ErrClosed: the pool is closing with the server. Retry-After: 1.
//
// Any other err (nil, ctx's error, an *OpenError) is the caller's to answer:
// Unavailable writes nothing and returns false. It never blocks.
//
// This is how a pool sheds HTTP load: the pool decides in Get, in the same
// turn that would have lent, and the handler passes the refusal on.
//
//	conn, err := pool.Get(r.Context())
//	if moonhttp.Unavailable(w, r, err) {
//		return
//	}
//
// Middleware that asked the pool ahead of the handler (Stats) would cost
// every request a second round trip to the pool's actor, and would refuse
// on a signal the pool itself does not act on: Stats.Refusal is the share
// of opens the breaker refuses, while idle connections are still lent.
func Unavailable(w http.ResponseWriter, r *http.Request, err error, opts ...Option) bool {
	retry := 1
	var we *client.WaitError
	switch {
	case err == nil:
		return false
	case errors.As(err, &we):
		retry = ceilSeconds(we.Wait)
	case errors.Is(err, client.ErrShed), errors.Is(err, client.ErrClosed):
	default:
		return false
	}
	reject(w, r, newSettings(opts).reject, Rejection{Status: http.StatusServiceUnavailable, RetryAfter: retry})
	return true
}
