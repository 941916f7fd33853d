// Package moonotel reports moonpool's pools and limiters as OpenTelemetry
// metrics, through the OpenTelemetry metrics API only: the program brings
// the SDK and its exporter, and without one every instrument is a no-op.
//
// ObservePool follows the semantic conventions for database client
// connection pools (experimental at the time of writing): the
// db.client.connection.* instruments, each with the attribute
// db.client.connection.pool.name. Every instrument is observable, read
// from one Stats snapshot in a callback when the SDK collects, so
// instrumenting a pool costs its Get and Put nothing.
//
//	reg, err := moonotel.ObservePool(provider, pool, "users-db")
//	if err != nil {
//		return err
//	}
//	defer reg.Unregister()
//
// It leaves out db.client.connection.create_time, .wait_time and
// .use_time. They are histograms, which need each Open, Get and loan timed
// as it happens: a cost on the hot path that a snapshot cannot give. In
// their place moonpool.pool.waits and moonpool.pool.wait_time count the
// Gets that waited in line and their time there, from which a mean wait
// follows. Counts the conventions do not name (Gets, closes by reason,
// resets, leaks) are reported under moonpool.pool.*.
//
// db.client.connection.max follows SetLimits. The idle limits,
// db.client.connection.idle.max and .idle.min, are those given at
// registration: Stats does not carry them.
//
// ObserveLimiter reports a limiter's counts (allowed, refused, waited and
// the time spent waiting) and its quota now under moonpool.limiter.*, with
// the attribute moonpool.limiter.name; there are no semantic conventions
// for rate limiters to follow.
//
// ObserveAdaptive reports a client.AdaptiveGate under moonpool.adaptive.*:
// its limit, the calls in flight and in line, and its refusals by
// priority and reason.
package moonotel
