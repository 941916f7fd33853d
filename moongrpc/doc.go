// Package moongrpc puts moonpool's limiters in front of a gRPC server and
// its retries behind a gRPC client.
//
// On the server, UnaryServerInterceptor and StreamServerInterceptor hold
// each call to a per-key quota (a *client.KeyedBucket or *client.KeyedWindow,
// keyed by whatever Config.Key picks out of the call: a metadata value such
// as an API key, or the peer's address) and to a concurrency gate
// (*client.Gate). A call over its quota fails with codes.ResourceExhausted,
// and a call the gate turns away, or a quota closed with the server, with
// codes.Unavailable. The handler never runs. Config.Adaptive adds a
// *client.AdaptiveGate, which finds its own limit and lets calls in by the
// priority in their moonpool-priority metadata; the client interceptors
// send the ctx's priority there.
//
// A refusal carries its wait twice, for the two kinds of clients there
// are: as the grpc-retry-pushback-ms trailer that gRPC's own retry
// policy reads (gRFC A6), and as a google.rpc.RetryInfo detail in the
// status, which Google's API clients and most hand-written retry loops
// read. The interceptors also give a handler's own moonpool refusals (a
// pool that sheds, a ward that holds opens back past the caller's
// deadline) the code they deserve, codes.Unavailable, instead of
// codes.Unknown.
//
//	quota, _ := client.NewKeyedBucket(eng, 10, 20) // per client: 10 calls a second, bursts of 20
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(moongrpc.UnaryServerInterceptor(moongrpc.Config{
//			Key:   moongrpc.MetadataKey("x-api-key"),
//			Quota: quota,
//		})),
//	)
//
// On the client, UnaryClientInterceptor retries a call that failed with a
// code the caller allows (Unavailable and ResourceExhausted unless told
// otherwise) through client.Retry: on the engine's clock, under a
// client.Backoff, never sooner than the server's pushback and never past
// the call's deadline.
//
// NewUnaryClientInterceptor does the same from a ClientConfig, which can
// add a client.Budget and a client.Hedge. The budget holds retries and hedges to
// a share of the calls. With its defaults, an outage costs the server at
// most 1.1 attempts per call once traffic passes ten a second. The hedge
// races a slow call of a method without side effects with a copy, sent
// at the latency the budget has learned:
//
//	budget, _ := client.NewBudget(eng, client.BudgetConfig{})
//	conn, _ := grpc.NewClient(target, creds,
//		grpc.WithUnaryInterceptor(moongrpc.NewUnaryClientInterceptor(moongrpc.ClientConfig{
//			Engine: eng,
//			Budget: budget,
//			Hedge:  &client.Hedge{}, // at the 95th percentile, one hedge at most
//		})))
//
// The package imports gRPC; moonpool's own packages (policy, actors,
// engine, client) never do, so a program that does not import moongrpc
// does not build gRPC.
package moongrpc
