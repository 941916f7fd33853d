// Package moonprom reports moonpool's pools and limiters to Prometheus
// through client_golang. NewPoolCollector is a prometheus.Collector for one
// pool, in the manner of client_golang's collectors.NewDBStatsCollector for
// a *sql.DB. Each scrape takes one Stats snapshot, so a collector costs the
// pool's Get and Put nothing.
//
//	reg.MustRegister(moonprom.NewPoolCollector(pool, "users-db"))
//
// Every metric is named moonpool_pool_… and carries the pool's name as the
// const label pool, so the collectors of several pools share one
// registry.
//
// NewLimiterCollector does the same for a limiter: what it allowed and
// refused, its waits and its quota now, named moonpool_limiter_… under the
// const label limiter.
//
//	reg.MustRegister(moonprom.NewLimiterCollector(perClient, "api"))
//
// NewAdaptiveCollector reports a client.AdaptiveGate: its limit, the calls
// in flight and in line, and its refusals by priority and reason, named
// moonpool_adaptive_… under the const label gate.
package moonprom
