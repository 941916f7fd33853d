package moonhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moonhttp"
)

// A per-client quota of bursts of two, refilled at one request every two
// seconds: the third request in a row is refused with the wait for the
// next token, in whole seconds, and every answer says what is left.
func ExampleLimit() {
	eng := client.NewEngine()
	defer eng.Shutdown(context.Background())

	perClient, _ := client.NewKeyedBucket(eng, 0.5, 2)
	quota := moonhttp.Limit(perClient, moonhttp.BucketPolicy(0.5, 2))
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
	srv := httptest.NewServer(quota(hello))
	defer srv.Close()

	var resp *http.Response
	for range 3 {
		var err error
		resp, err = srv.Client().Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, "RateLimit:", resp.Header.Get("RateLimit"), "Retry-After:", resp.Header.Values("Retry-After"))
	}
	fmt.Println("RateLimit-Policy:", resp.Header.Get("RateLimit-Policy"))
	// Output:
	// 200 RateLimit: "default";r=1;t=2 Retry-After: []
	// 200 RateLimit: "default";r=0;t=4 Retry-After: []
	// 429 RateLimit: "default";r=0;t=2 Retry-After: [2]
	// RateLimit-Policy: "default";q=2;w=4
}

// Behind a load balancer at 10.0.0.0/8, the client is the address the
// balancer says it forwarded for; what the client wrote into the header
// itself is ignored.
func ExampleClientIP() {
	key := moonhttp.ClientIP(netip.MustParsePrefix("10.0.0.0/8"))

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.1.2.3:41000"
	r.Header.Set("X-Forwarded-For", "6.6.6.6, 198.51.100.7")
	fmt.Println(key(r))

	r.RemoteAddr = "203.0.113.9:41000" // not the balancer: the header is not read
	fmt.Println(key(r))
	// Output:
	// 198.51.100.7
	// 203.0.113.9
}

// A handler passes its pool's refusal on as a 503 with Retry-After.
func ExampleUnavailable() {
	w := httptest.NewRecorder()
	err := fmt.Errorf("get: %w", client.ErrTooManyWaiting) // as pool.Get(r.Context()) might say
	if moonhttp.Unavailable(w, httptest.NewRequest("GET", "/", nil), err) {
		fmt.Println(w.Code, w.Header().Get("Retry-After"), w.Header().Get("Content-Type"))
	}
	// Output:
	// 503 1 application/problem+json
}

// Both forms of the header.
func ExampleParseRetryAfter() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	fmt.Println(moonhttp.ParseRetryAfter("120", now))
	fmt.Println(moonhttp.ParseRetryAfter("Sun, 01 Mar 2026 12:00:05 GMT", now))
	fmt.Println(moonhttp.ParseRetryAfter("soon", now))
	// Output:
	// 2m0s true
	// 5s true
	// 0s false
}

// A client whose server is briefly unavailable: the GET is sent again once
// the Retry-After has passed (here 0 s, spread by up to the backoff's first
// ceiling, 100 ms), and the caller sees only the answer that came through.
func ExampleTransport() {
	eng := client.NewEngine()
	defer eng.Shutdown(context.Background())

	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "fresh data")
	}))
	defer srv.Close()

	hc := &http.Client{Transport: &moonhttp.Transport{Base: srv.Client().Transport, Engine: eng}}
	resp, err := hc.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body), "after", calls.Load(), "attempts")
	// Output:
	// 200 fresh data after 2 attempts
}
