package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
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

// Every key earns a token a second and holds 100, on both sides. Each
// slice builds its sides afresh on keys of their own, so each starts full:
// one hot key lets exactly its burst through (and a token a second more),
// on either side, and 10,000 keys let every call through.
const (
	redisRate  = 1
	redisBurst = 100
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
	for _, n := range cfg.redis.keys {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = "client-" + strconv.Itoa(i)
		}
		name := fmt.Sprintf("Allow, %d keys", n)
		if n == 1 {
			name = "Allow, 1 key"
		}
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
					return oursRedis(eng, srv.Addr(), callers, fmt.Sprintf("bench:%d:", built.Add(1)), keys)
				}},
				{name: "redis_rate", build: func(callers int) (contender, error) {
					return theirRedis(srv.Addr(), callers, fmt.Sprintf("bench:%d:", built.Add(1)), keys), nil
				}},
			},
		})
	}
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

// oursRedis is a moonredis.Bucket; each call takes the next key. A
// request answered by the FailMode rather than Redis is an error here: the
// comparison is of calls Redis decided.
func oursRedis(eng *engine.Engine, addr string, callers int, prefix string, keys []string) (contender, error) {
	var cmds, next, allowed atomic.Int64
	rdb := countingClient(addr, callers, &cmds)
	b, err := moonredis.NewBucket(eng, moonredis.Config{Client: rdb, Prefix: prefix, Timeout: 5 * time.Second}, redisRate, redisBurst)
	if err != nil {
		rdb.Close()
		return contender{}, err
	}
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
		},
		count: cmds.Load,
		extra: allowed.Load,
		errs:  func() int64 { return b.Stats().Fallbacks },
	}, nil
}

// theirRedis is a redis_rate.Limiter with the same limit; each call takes
// the next key.
func theirRedis(addr string, callers int, prefix string, keys []string) contender {
	var cmds, next, allowed, errs atomic.Int64
	rdb := countingClient(addr, callers, &cmds)
	l := redis_rate.NewLimiter(rdb)
	limit := redis_rate.Limit{Rate: redisRate, Burst: redisBurst, Period: time.Second}
	var once sync.Once
	ctx := context.Background()
	return contender{
		run: func(n int) {
			a := 0
			for range n {
				res, err := l.Allow(ctx, prefix+keys[int(next.Add(1)-1)%len(keys)], limit)
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
		close: func() { rdb.Close() },
		count: cmds.Load,
		extra: allowed.Load,
		errs:  errs.Load,
	}
}

// redisTargets are issue 12's: ns per Allow against redis_rate's on one
// hot key, where batching should pay, and alone, where it cannot.
func redisTargets(results []result) []check {
	r := find(results, "Redis", "Allow, 1 key")
	if r == nil {
		return nil // not run, or skipped for want of a server
	}
	var cs []check
	add := func(target string, pick func(int) bool, most float64) {
		s, worst, ok := vsAt(r, "redis_rate", pick, ns)
		cs = append(cs, check{issue: 12, target: target, measured: s, met: worst <= most, known: ok})
	}
	add("Redis: Allow at most 1.0× redis_rate at 1 caller", func(c int) bool { return c == 1 }, 1)
	add("Redis: Allow at most 0.5× redis_rate at 64 and 512 callers on one hot key", func(c int) bool { return c == 64 || c == 512 }, 0.5)
	return cs
}
