package moonhttp

import (
	"context"
	"errors"
	"net/http"

	"github.com/moonpool-go/moonpool/client"
)

// Adaptive is middleware that holds requests to g, a gate whose limit
// follows the latency of the requests it lets through. At most g's limit
// run next at once. The rest wait in g's line, the most important first,
// and under overload the least important are refused first.
//
// priority says how important each request is. A nil priority reads
// PriorityHeader (HeaderPriority("")): a request without it is
// client.PriorityNormal. The priority goes into the request's ctx
// (client.WithPriority), so next sees it, and a Transport next calls with
// that ctx sends it on to the next server.
//
// The call blocks while the request waits in line. A request g refuses
// never reaches next. It gets 503 Service Unavailable with Retry-After
// and a problem+json body (WriteProblem, or WithReject's), as a full
// Concurrency gate answers:
//   - Retry-After: 1 when it is shed: the line was full of requests as
//     important, or it was cut as the limit fell (client.ErrShed). So is
//     every request once g is closed.
//   - its expected wait in line, in whole seconds rounded up, when the
//     request's deadline comes first (a *client.WaitError). The deadline
//     is the ctx's: set one by wrapping Adaptive in http.TimeoutHandler.
//   - Retry-After: 1 when the deadline passes while it waits in line.
//
// A request whose ctx is cancelled while it waits in line leaves the line,
// and nothing is written: its client has gone, or the server is shutting
// down. WithKey and WithLegacyHeaders do not apply.
//
// The room is given back when next returns, also when it panics. How long
// next took is the latency g learns from. A nil g refuses nothing, and
// still reads the priority into ctx.
func Adaptive(g *client.AdaptiveGate, priority PriorityFunc, opts ...Option) func(http.Handler) http.Handler {
	s := newSettings(opts)
	if priority == nil {
		priority = HeaderPriority("")
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if p := priority(r); p != client.PriorityFrom(r.Context()) {
				r = r.WithContext(client.WithPriority(r.Context(), p))
			}
			if g == nil {
				next.ServeHTTP(w, r)
				return
			}
			pass, err := g.Enter(r.Context())
			if err != nil {
				refuseAdaptive(w, r, s.reject, err)
				return
			}
			defer pass.Leave()
			next.ServeHTTP(w, r)
		})
	}
}

// refuseAdaptive answers a request the adaptive gate refused with err.
func refuseAdaptive(w http.ResponseWriter, r *http.Request, f RejectFunc, err error) {
	retry := 1
	var we *client.WaitError
	switch {
	case errors.As(err, &we):
		retry = ceilSeconds(we.Wait)
	case errors.Is(err, context.Canceled):
		return // nobody to tell
	}
	reject(w, r, f, Rejection{Status: http.StatusServiceUnavailable, RetryAfter: retry})
}
