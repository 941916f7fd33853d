package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/redistest"
	"github.com/moonpool-go/moonpool/moonredis"
	"github.com/redis/go-redis/v9"
)

// The Redis suite takes from a keyed limit kept in a real redis-server,
// started by the suite on a free port: moonredis.Bucket (its actor sends
// the requests of one key that arrive while a call is in flight as one
// script call) against go-redis/redis_rate (one GCRA script call per
// request), the same limit on each side, each side on its own go-redis
// client with the client's defaults, counting the commands it sends.

// redisConfig is how the Redis suite runs.
type redisConfig struct {
	callers []int
	keys    []int // the key spaces: one hot key, then many
	ops     int   // calls per slice, split among the callers
	plan    plan  // its rounds and samples
}

// redisLimit is a key's limit, the same on both sides: rate tokens a
// second, holding burst.
type redisLimit struct{ rate, burst float64 }

// The limits the rows use. Each slice builds its sides afresh on keys of
// their own, so each starts full. A key earning a token a second and
// holding 100 lets every call through over 10,000 keys, and over one key
// exactly its burst (and a token a second more): on that row ("over its
// limit") moonpool answers the rest from the refusal it remembers, without
// a call, so it shows that, not a round trip. The hot key of the other
// one-key row earns and holds a million, so every call is let through and
// goes to Redis on both sides: the times compare the same work, and
// batching is what differs.
var (
	redisTight = redisLimit{rate: 1, burst: 100}
	redisOpen  = redisLimit{rate: 1e6, burst: 1e6}
)

// redisSuite starts a redis-server and returns the suite's rows: Allow over
// each key space, at each level of callers. Its error wraps
// redistest.ErrNoServer when the machine has no redis-server.
func redisSuite(eng *engine.Engine, cfg config) ([]row, func(), error) {
	dir, err := os.MkdirTemp("", "moonpool-redis-")
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := redistest.Start(ctx, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	forget := onInterrupt(func() { srv.Stop(); os.RemoveAll(dir) })
	stop := func() {
		forget()
		srv.Stop()
		os.RemoveAll(dir)
	}
	var built atomic.Int64 // makes every side's keys its own
	var rows []row
	type space struct {
		name  string
		keys  int
		limit redisLimit
	}
	var spaces []space
	for _, n := range cfg.redis.keys {
		if n == 1 {
			spaces = append(spaces, space{"Allow, 1 key", 1, redisOpen}, space{"Allow, 1 key over its limit", 1, redisTight})
		} else {
			spaces = append(spaces, space{fmt.Sprintf("Allow, %d keys", n), n, redisTight})
		}
	}
	for _, sp := range spaces {
		keys := clientKeys(sp.keys)
		name, limit := sp.name, sp.limit
		rows = append(rows, row{
			suite:   "Redis",
			name:    name,
			callers: cfg.redis.callers,
			batch:   1,
			every:   1,
			fixed:   cfg.redis.ops,
			count:   countRedis,
			plan:    &cfg.redis.plan,
			sides: []side{
				{name: "moonpool", ours: true, build: func(callers int) (contender, error) {
					return oursRedis(eng, srv.Addr(), callers, fmt.Sprintf("bench:%d:", built.Add(1)), keys, limit, 0)
				}},
				{name: "redis_rate", build: func(callers int) (contender, error) {
					return theirRedis(srv.Addr(), callers, fmt.Sprintf("bench:%d:", built.Add(1)), keys, limit), nil
				}},
			},
		})
	}
	rows = append(rows, leaseRows(eng, cfg, srv.Addr(), &built)...)
	return rows, stop, nil
}

// countingClient is a go-redis client for addr whose every command, alone
// or in a pipeline, adds one to n. Its pool holds as many connections as
// callers will use (up to the client's default most), opened before the
// slice starts.
func countingClient(addr string, callers int, n *atomic.Int64) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}) // as moonredis.Config advises, for both sides
	var wg sync.WaitGroup
	for range min(callers, rdb.Options().PoolSize) {
		wg.Go(func() { rdb.Ping(context.Background()) })
	}
	wg.Wait()
	rdb.AddHook(commandCounter{n})
	return rdb
}

type commandCounter struct{ n *atomic.Int64 }

func (c commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// oursRedis is a moonredis.Bucket, leasing credit for lease when it is
// above zero; each call takes the next key. A request answered by the
// FailMode rather than Redis, or a failed lease call, is an error here:
// the comparison is of calls Redis decided. Close gives back what a lease
// holds unspent.
func oursRedis(eng *engine.Engine, addr string, callers int, prefix string, keys []string, limit redisLimit, lease time.Duration) (contender, error) {
	var cmds, next, allowed atomic.Int64
	rdb := countingClient(addr, callers, &cmds)
	b, err := moonredis.NewBucket(eng, moonredis.Config{Client: rdb, Prefix: prefix, Timeout: 5 * time.Second, Lease: lease}, limit.rate, limit.burst)
	if err != nil {
		rdb.Close()
		return contender{}, err
	}
	cpu, closeCPU := serverCPU(addr)
	return contender{
		run: func(n int) {
			a := 0
			for range n {
				if b.Allow(keys[int(next.Add(1)-1)%len(keys)]) {
					a++
				}
			}
			allowed.Add(int64(a))
		},
		close: func() {
			closeWithin(b.Close)
			rdb.Close()
			closeCPU()
		},
		count: cmds.Load,
		extra: allowed.Load,
		cpu:   cpu,
		errs:  func() int64 { return b.Stats().Fallbacks + b.LeaseStats().Failures },
	}, nil
}

// theirRedis is a redis_rate.Limiter with the same limit; each call takes
// the next key.
func theirRedis(addr string, callers int, prefix string, keys []string, limit redisLimit) contender {
	var cmds, next, allowed, errs atomic.Int64
	rdb := countingClient(addr, callers, &cmds)
	l := redis_rate.NewLimiter(rdb)
	lim := redis_rate.Limit{Rate: int(limit.rate), Burst: int(limit.burst), Period: time.Second}
	var once sync.Once
	ctx := context.Background()
	cpu, closeCPU := serverCPU(addr)
	return contender{
		run: func(n int) {
			a := 0
			for range n {
				res, err := l.Allow(ctx, prefix+keys[int(next.Add(1)-1)%len(keys)], lim)
				switch {
				case err != nil:
					errs.Add(1)
					once.Do(func() { warn("Redis: redis_rate: %v", err) })
				case res.Allowed > 0:
					a++
				}
			}
			allowed.Add(int64(a))
		},
		close: func() { rdb.Close(); closeCPU() },
		count: cmds.Load,
		extra: allowed.Load,
		cpu:   cpu,
		errs:  errs.Load,
	}
}

// serverCPU reads the CPU time redis-server at addr has used, user and
// system, in microseconds, through a client of its own that no command
// count sees; 0 when it cannot. done closes that client.
func serverCPU(addr string) (read func() int64, done func()) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	read = func() int64 {
		info, err := rdb.Info(context.Background(), "cpu").Result()
		if err != nil {
			return 0
		}
		return parseCPU(info)
	}
	return read, func() { rdb.Close() }
}

// parseCPU is used_cpu_user plus used_cpu_sys of an INFO cpu reply, in
// microseconds.
func parseCPU(info string) int64 {
	var us int64
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			if s, err := strconv.ParseFloat(v, 64); err == nil {
				us += int64(math.Round(s * 1e6))
			}
		}
	}
	return us
}

// redisTargets are the Redis suite's, on the rows where every call goes to
// Redis on both sides (the row over its limit, answered mostly from
// remembered refusals, judges none): ns per Allow and p99 against
// redis_rate's on one hot key and on many. At 1 caller each side makes one
// round trip a call, so the line asks for parity within the machine's
// noise; from 8 callers on, batching should pay; over many keys at 64 and
// 512 callers, a few script runs carrying many keys each should pay most;
// on the hot key at 64 and 512, one run answers a whole batch.
func redisTargets(results []result) []check {
	hot := find(results, "Redis", "Allow, 1 key")
	if hot == nil {
		return nil // not run, or skipped for want of a server
	}
	rows := []*result{hot}
	for i := range results {
		r := &results[i]
		if r.row.suite == "Redis" && strings.HasPrefix(r.row.name, "Allow, ") && strings.HasSuffix(r.row.name, " keys") {
			rows = append(rows, r)
		}
	}
	var cs []check
	// across is one check of value at the levels picked, over rows.
	across := func(target string, rows []*result, pick func(int) bool, value func(*measured) float64, most float64) {
		var parts []string
		worst, known := math.Inf(-1), false
		for _, r := range rows {
			s, w, ok := vsAt(r, "redis_rate", pick, value)
			if !ok {
				continue
			}
			parts = append(parts, strings.TrimPrefix(r.row.name, "Allow, ")+" "+s)
			worst, known = max(worst, w), true
		}
		cs = append(cs, check{group: "Redis", target: target, measured: strings.Join(parts, "; "), met: worst <= most, known: known})
	}
	at := func(levels ...int) func(int) bool {
		return func(c int) bool { return slices.Contains(levels, c) }
	}
	across("Redis: Allow at most 1.10× redis_rate at 1 caller, one round trip a call on each side", rows, at(1), ns, 1.1)
	across("Redis: Allow at most 1.0× redis_rate at 8, 64 and 512 callers, one key and many", rows, at(8, 64, 512), ns, 1)
	across("Redis: Allow's p99 at most 1.0× redis_rate's at 8, 64 and 512 callers, one key and many", rows, at(8, 64, 512), p99, 1)
	across("Redis: Allow at most 0.3× redis_rate at 64 and 512 callers over many keys", rows[1:], at(64, 512), ns, 0.3)
	across("Redis: Allow at most 0.5× redis_rate at 64 and 512 callers on one hot key", rows[:1], at(64, 512), ns, 0.5)
	across("Redis: Allow allocates no more than redis_rate at every level, one key and many", rows, func(int) bool { return true }, allocsPer, 1)
	cs = append(cs, leaseTargets(results)...)
	return cs
}

// allocsPer is a side's heap allocations per call.
func allocsPer(m *measured) float64 { return m.allocs }
