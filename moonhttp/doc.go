// Package moonhttp fits moonpool to net/http: middleware that holds each
// client to a quota and the server to a concurrency limit, answering with
// the status codes and headers clients know, and a client transport that
// retries politely.
//
// # Serving
//
// Limit counts each request against a keyed limiter (client.KeyedBucket or
// client.KeyedWindow) under a key the server chooses: the client's address
// (ClientIP, which reads X-Forwarded-For only from proxies you trust), an
// API key (Header), or any KeyFunc. Over quota, a request gets 429 with
// Retry-After in whole seconds, rounded up; every response the quota
// answers carries the IETF RateLimit-Policy and RateLimit fields, so
// clients can pace themselves before they are refused:
//
//	eng := client.NewEngine()
//	defer eng.Shutdown(ctx)
//	perClient, _ := client.NewKeyedBucket(eng, 10, 20) // 10/s, bursts of 20
//	quota := moonhttp.Limit(perClient, moonhttp.BucketPolicy(10, 20),
//		moonhttp.WithKey(moonhttp.ClientIP(netip.MustParsePrefix("10.0.0.0/8"))))
//	http.ListenAndServe(":8080", quota(mux))
//
// Concurrency caps the requests in flight across all clients with a
// client.Gate and answers 503 past it. Adaptive does the same with a
// client.AdaptiveGate, which finds its own limit; it reads each request's
// priority from the Moonpool-Priority header, and Transport sends the
// caller's on. A pool sheds load by refusing in
// Get; Unavailable turns those refusals into 503s. Refusals have a small
// application/problem+json body (RFC 9457) unless WithReject says
// otherwise.
//
// # Calling
//
// Transport retries idempotent requests that failed to connect or were
// told 429, 502, 503 or 504, under a client.Backoff on the engine's clock;
// it waits out a Retry-After (seconds or an HTTP-date) spread by jitter,
// stops when the request's ctx ends, and can hold the whole process to a
// client.Bucket so it does not hammer a backend:
//
//	hc := &http.Client{Transport: &moonhttp.Transport{Engine: eng}}
//
// A client.Budget holds retries to a share of the requests. With its
// defaults, an outage costs the backend at most 1.1 attempts per request
// once traffic passes ten a second. A client.Hedge races a slow GET with
// a copy, sent at the latency the budget has learned, within the same
// budget:
//
//	budget, _ := client.NewBudget(eng, client.BudgetConfig{})
//	hc := &http.Client{Transport: &moonhttp.Transport{
//		Engine: eng,
//		Budget: budget,
//		Hedge:  &client.Hedge{}, // at the 95th percentile, one hedge at most
//	}}
//
// # Time
//
// Everything here reads time from the engine's clock, so tests that hand
// the engine a virtual clock see exact header values and exact waits. The
// one exception is an HTTP-date in Retry-After from a response without a
// Date field, which can only be read against the local wall clock.
package moonhttp
