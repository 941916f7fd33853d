package moonhttp

import (
	"net/http"
	"reflect"
	"time"

	"github.com/moonpool-go/moonpool/client"
)

// Limiter is what Limit asks about each request: client.KeyedBucket and
// client.KeyedWindow, whose Try answers whether the request is allowed, how
// long a refused one must wait and what is left, all from one turn of the
// limiter's actor, so the headers agree with the answer.
type Limiter interface {
	Try(key string) client.Decision
}

// Quoter is a limiter that says its quota now, as every client limiter
// does (client.KeyedBucket.Quota, client.KeyedWindow.Quota): q requests per
// w. Limit reads it for every request, so the fields follow a limiter
// retuned while the server runs (SetLimit, SetBurst, SetAllow).
type Quoter interface {
	Quota() (q int, w time.Duration)
}

// bucketNumbers is a bucket that says its rate and burst, from which Limit
// works out t exactly rather than from q and w, which are rounded.
type bucketNumbers interface {
	Limit() float64
	Burst() float64
}

// live is p with the numbers l has now, if l says them: p supplies the
// name and whether it is a bucket's.
func (p Policy) live(l Limiter) Policy {
	if b, ok := l.(bucketNumbers); ok && p.burst > 0 {
		n := BucketPolicy(b.Limit(), b.Burst())
		n.Name = p.Name
		return n
	}
	if q, ok := l.(Quoter); ok && p.burst == 0 {
		p.Quota, p.Window = q.Quota()
	}
	return p
}

// Option changes how a middleware or Unavailable answers. Options that do
// not apply to a call (a key for Concurrency, say) are ignored by it.
type Option func(*settings)

type settings struct {
	key    KeyFunc
	reject RejectFunc
	legacy bool
	live   bool // the limiter says its numbers: read them for each request
}

func newSettings(opts []Option) settings {
	s := settings{reject: WriteProblem}
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	return s
}

// WithKey sets how Limit keys requests. The default is ClientIP() with no
// trusted proxies: the peer's address. A nil f keeps the default.
func WithKey(f KeyFunc) Option {
	return func(s *settings) {
		if f != nil {
			s.key = f
		}
	}
}

// WithReject sets what writes a refused request's status and body. The
// default is WriteProblem. A nil f keeps the default.
func WithReject(f RejectFunc) Option {
	return func(s *settings) {
		if f != nil {
			s.reject = f
		}
	}
}

// WithLegacyHeaders makes Limit also send X-RateLimit-Limit (q),
// X-RateLimit-Remaining (r) and X-RateLimit-Reset (t, in seconds from now),
// which many clients read still. Reset is a span, as in the IETF draft's
// early revisions, not a Unix time: the two conventions are both in use,
// and a span needs no agreement on clocks.
func WithLegacyHeaders() Option {
	return func(s *settings) { s.legacy = true }
}

// Limit is middleware that counts every request against l under its key
// (WithKey; the peer's address by default) and refuses the ones over quota.
//
// A refused request gets 429 Too Many Requests with Retry-After, in whole
// seconds rounded up (client.Decision.RetryAfter: at least 1, at most a
// day), and a small problem+json body (WriteProblem, or WithReject's), and
// next does not run. Every response the quota answers, allowed or refused,
// carries the RateLimit-Policy and RateLimit fields (see Policy), so a
// client can pace itself before it is refused:
//
//	RateLimit-Policy: "default";q=20;w=2
//	RateLimit: "default";r=0;t=1
//	Retry-After: 1
//
// r is what is left for the key after this request; t is, for a refusal,
// the Retry-After, and for an allowed request when the quota will be whole
// again at the latest if the client makes no more requests. The fields are
// set before next runs, so a handler may read or change them.
//
// p must describe l: BucketPolicy or WindowPolicy with the numbers l was
// made with. When l says its numbers now (a Quoter; for a bucket, Limit
// and Burst), as the client limiters do, Limit reads them for every
// request and p gives only the name and the kind, so the fields follow a
// retune while the server runs. Limit never blocks on other requests beyond
// one round trip to the limiter's actor.
//
// Once l is closed, or its engine shut down (its Decision says Closed),
// every request gets 503 Service Unavailable with Retry-After: 1 and no
// RateLimit fields. That is what a pool closed with the server answers
// (see Unavailable). The server is going away; the client's quota is not
// what refused it. An open quota that never comes back (a bucket that does
// not refill, a window of nothing) answers 429 with a Retry-After of a day.
//
// A nil l refuses nothing and sets no fields. So does a nil pointer in l,
// such as a *client.KeyedBucket whose constructor failed.
func Limit(l Limiter, p Policy, opts ...Option) func(http.Handler) http.Handler {
	s := newSettings(opts)
	if s.key == nil {
		s.key = ClientIP()
	}
	if isNil(l) {
		l = nil
	}
	_, nums := l.(bucketNumbers)
	_, quotes := l.(Quoter)
	s.live = nums || quotes
	return func(next http.Handler) http.Handler {
		if l == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d := l.Try(s.key(r))
			p := p
			if s.live {
				p = p.live(l)
			}
			if !d.OK && d.Closed {
				reject(w, r, s.reject, Rejection{Status: http.StatusServiceUnavailable, RetryAfter: 1})
				return
			}
			p.setFields(w.Header(), d, s.legacy)
			if !d.OK {
				reject(w, r, s.reject, Rejection{
					Status:     http.StatusTooManyRequests,
					RetryAfter: d.RetryAfter(),
					Policy:     p.name(),
				})
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// isNil says whether v is nil or a nil pointer in an interface, whose
// methods would panic on the first request.
func isNil(v any) bool {
	r := reflect.ValueOf(v)
	return !r.IsValid() || r.Kind() == reflect.Pointer && r.IsNil()
}
