package main

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/moonpool-go/moonpool/engine"
)

// benchLease is the Lease of the leased row: the value Config.Lease
// suggests.
const benchLease = 50 * time.Millisecond

// leaseRows are the Redis suite's rows for leased credit: one hot key of
// the open limit, whose moonredis.Bucket leases its tokens from Redis
// (Config.Lease) and lets calls through from the lease without a round
// trip, against redis_rate on the same limit, one round trip a call. Each
// slice starts on fresh keys with no lease, so the first calls of a slice
// go to Redis one by one and the lease grows from there: that cost is in
// the times. The note gives Redis commands per call let through.
func leaseRows(eng *engine.Engine, cfg config, addr string, built *atomic.Int64) []row {
	if !slices.Contains(cfg.redis.keys, 1) {
		return nil
	}
	keys := clientKeys(1)
	limit := redisOpen
	return []row{{
		suite:   "Redis",
		name:    "Allow, 1 key, leased",
		callers: cfg.redis.callers,
		batch:   1,
		every:   1,
		fixed:   cfg.redis.ops,
		count:   countRedis,
		plan:    &cfg.redis.plan,
		sides: []side{
			{name: "moonpool", ours: true, build: func(callers int) (contender, error) {
				return oursRedis(eng, addr, callers, fmt.Sprintf("bench:%d:", built.Add(1)), keys, limit, benchLease)
			}},
			{name: "redis_rate", build: func(callers int) (contender, error) {
				return theirRedis(addr, callers, fmt.Sprintf("bench:%d:", built.Add(1)), keys, limit), nil
			}},
		},
	}}
}

// leaseTargets are the leased row's: ns per Allow against redis_rate's,
// at most 0.05× at 1 caller and 0.02× at 64 and 512, where every one of
// redis_rate's calls is a round trip and almost none of the lease's.
func leaseTargets(results []result) []check {
	r := find(results, "Redis", "Allow, 1 key, leased")
	if r == nil {
		return nil
	}
	var cs []check
	s, worst, ok := vsAt(r, "redis_rate", func(c int) bool { return c == 1 }, ns)
	cs = append(cs, check{group: "Redis", target: "Redis: Allow with leases at most 0.05× redis_rate at 1 caller on one hot key", measured: s, met: worst <= 0.05, known: ok})
	s, worst, ok = vsAt(r, "redis_rate", func(c int) bool { return c == 64 || c == 512 }, ns)
	cs = append(cs, check{group: "Redis", target: "Redis: Allow with leases at most 0.02× redis_rate at 64 and 512 callers on one hot key", measured: s, met: worst <= 0.02, known: ok})
	return cs
}
