package moonhttp

import (
	"net/http"

	"github.com/moonpool-go/moonpool/client"
)

// PriorityHeader is the header that carries a request's priority between
// moonpool's clients and servers. Its value is a client.Priority name:
// "low", "normal", "high" or "critical".
const PriorityHeader = "Moonpool-Priority"

// PriorityFunc says how important a request is. Adaptive calls it for
// each request, before the request takes a place at the gate. Decide
// from what you trust: see HeaderPriority.
type PriorityFunc func(r *http.Request) client.Priority

// HeaderPriority returns a PriorityFunc that reads the priority from the
// first value of the header name (PriorityHeader when name is empty),
// with client.ParsePriority. A request without the header, or with a value it
// does not know, is client.PriorityNormal.
//
// A client can send any header. Read this one only from callers you
// trust: have your edge proxy set or strip it, or use a PriorityFunc that
// decides from what the client cannot choose (the path, an authenticated
// caller).
func HeaderPriority(name string) PriorityFunc {
	if name == "" {
		name = PriorityHeader
	}
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) client.Priority {
		p, _ := client.ParsePriority(r.Header.Get(name))
		return p
	}
}

// withPriorityHeader is req with the priority of its ctx in
// PriorityHeader, for Transport. A request whose ctx carries
// client.PriorityNormal, or none, goes as it is. Otherwise req is cloned
// and the header replaced, since a RoundTripper must not change the
// request it is given.
func withPriorityHeader(req *http.Request) *http.Request {
	p := client.PriorityFrom(req.Context())
	if p == client.PriorityNormal {
		return req
	}
	v := p.String()
	if vs := req.Header[PriorityHeader]; len(vs) == 1 && vs[0] == v {
		return req
	}
	r := req.Clone(req.Context())
	r.Header.Set(PriorityHeader, v)
	return r
}
