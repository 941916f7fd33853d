package moonredis

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The fleet TestOutage runs: three processes share a bucket of 50 a
// second, bursts of 10, on one hot key, each calling far more often than
// that, under FailLocal.
const (
	outageProcs   = 3
	outageRate    = 50.0
	outageBurst   = 10.0
	outageTimeout = 100 * time.Millisecond
	outageCallers = 2                    // goroutines calling in each process
	outagePace    = 2 * time.Millisecond // each caller's pause between calls
)

// The run's schedule, from its start: Redis is killed at outageKill and
// started again at outageBack; the processes stop calling at outageEnd.
const (
	outageKill = 600 * time.Millisecond
	outageBack = outageKill + 2*time.Second
	outageEnd  = outageBack + 2600*time.Millisecond
)

// outageCall is one Allow a process made: when it began and ended, from
// the run's start (the processes share the machine's wall clock), whether
// it was let through, and, by its end, how many requests Redis had let
// through in that process and how many calls it had sent to Redis.
type outageCall struct {
	start, end time.Duration
	ok         bool
	byRedis    int64
	calls      int64
}

// TestOutage: three processes share a limit on a real redis-server, which
// is killed for 2 s and started again on the same port. Two use
// go-redis's default retries, one none (MaxRetries -1) and ContextTimeoutEnabled.
// Once each has seen a few calls fail, its calls are answered by the local
// share in well under a millisecond, not after Config.Timeout; from the
// kill on, the fleet never lets through more than the limit plus one
// burst in any stretch of time (the local shares start full, and so does
// Redis, which comes back empty); and Redis lets requests through again
// once it is back.
func TestOutage(t *testing.T) {
	srv := redistest.New(t)
	prefix := fmt.Sprintf("test:%d:", time.Now().UnixNano())
	start := time.Now().Add(300 * time.Millisecond) // time for the processes to start
	outs := make([]bytes.Buffer, outageProcs)
	errs := make([]error, outageProcs)
	ctx, cancel := context.WithTimeout(context.Background(), outageEnd+30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range outageProcs {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=outage", "MOONREDIS_ADDR="+srv.Addr(), "MOONREDIS_PREFIX="+prefix,
			fmt.Sprint("MOONREDIS_START=", start.UnixNano()), fmt.Sprint("MOONREDIS_SEED=", i))
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		wg.Go(func() { errs[i] = cmd.Run() })
	}
	time.Sleep(time.Until(start.Add(outageKill)))
	srv.Kill()
	killed := time.Since(start) // no call that begins after this reaches the old server
	time.Sleep(time.Until(start.Add(outageBack)))
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Since(start)
	wg.Wait()
	t.Logf("Redis killed at %v, answering again at %v", killed.Round(time.Millisecond), back.Round(time.Millisecond))

	var all []outageCall // admitted by the fleet, begun after the kill
	for i := range outageProcs {
		if errs[i] != nil {
			t.Fatalf("process %d: %v\n%s", i, errs[i], outs[i].String())
		}
		calls, err := readOutageCalls(&outs[i])
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
		var during []outageCall
		var redisBefore, redisAfter int64
		for _, c := range calls {
			switch {
			case c.start >= killed && c.end < back:
				during = append(during, c)
			case c.start < killed:
				redisBefore = c.byRedis
			}
			if c.start >= killed && c.ok {
				all = append(all, c)
			}
			redisAfter = c.byRedis
		}
		// The first few calls wait for Redis; once the breaker trips, the
		// local share answers. A machine shared with other work may hold
		// a goroutine a millisecond now and then, but never for as long as
		// a call to Redis would take.
		var first, took []time.Duration
		lo, hi := int64(math.MaxInt64), int64(0) // the calls to Redis so far, over the outage once the breaker tripped
		for _, c := range during {
			d := c.end - c.start
			if c.start-killed < outageSettle {
				first = append(first, d)
				continue
			}
			took = append(took, d)
			lo, hi = min(lo, c.calls), max(hi, c.calls)
			if d >= outageTimeout {
				t.Errorf("process %d: a call %v after the kill took %v: it waited for Redis", i, (c.start - killed).Round(time.Millisecond), d)
			}
		}
		// No request goes to Redis: only the probes, one a Timeout.
		probes := int64((back-killed-outageSettle)/outageTimeout) + 1
		if hi-lo > probes {
			t.Errorf("process %d sent %d calls to Redis in the outage once its breaker tripped, want at most %d probes", i, hi-lo, probes)
		}
		slices.Sort(first)
		slices.Sort(took)
		slow := len(took) - countBelow(took, time.Millisecond)
		t.Logf("process %d: %d calls in the outage's first %v, %d over 1ms, the slowest %v; %d after, median %v, 99th percentile %v, %d over 1ms, slowest %v, %d probes; Redis let through %d before the kill, %d after it came back",
			i, len(first), outageSettle, len(first)-countBelow(first, time.Millisecond), pct(first, 100), len(took), pct(took, 50), pct(took, 99), slow, pct(took, 100), hi-lo, redisBefore, redisAfter-redisBefore)
		if len(took) < 200 {
			t.Errorf("process %d made only %d calls in the outage after its first %v, want hundreds: they waited for Redis", i, len(took), outageSettle)
		} else if slow > len(took)/100 {
			t.Errorf("process %d: %d of %d calls in the outage after its first %v took over a millisecond", i, slow, len(took), outageSettle)
		}
		if redisAfter == redisBefore {
			t.Errorf("process %d: Redis let nothing through once it was back", i)
		}
	}
	// Every stretch from an admission to a later one, both begun after
	// the kill, holds at most the limit plus one burst.
	slices.SortFunc(all, func(a, b outageCall) int { return int(a.end - b.end) })
	worst, at := math.Inf(-1), time.Duration(0)
	for i := range all {
		for j := i; j < len(all); j++ {
			over := float64(j-i+1) - (outageRate*(all[j].end-all[i].end).Seconds() + outageBurst)
			if over > worst {
				worst, at = over, all[i].end
			}
		}
	}
	span := all[len(all)-1].end - killed
	t.Logf("the fleet let through %d from the kill on, in %v: %.1f a second against a limit of %v; the most over the limit (%v a second plus a burst of %v) in any stretch: %.1f, from %v",
		len(all), span.Round(time.Millisecond), float64(len(all))/span.Seconds(), outageRate, outageRate, outageBurst, worst, at.Round(time.Millisecond))
	if worst > outageBurst {
		t.Errorf("the fleet let through %.1f more than the limit plus one burst in the stretch from %v", worst-outageBurst, at.Round(time.Millisecond))
	}
}

// outageSettle is how long from the kill on calls may wait for Redis: the
// three failed calls in a row that trip the breaker, each up to the
// Timeout, and one more for a call that went just before.
const outageSettle = 4*outageTimeout + 50*time.Millisecond

// countBelow is how many of sorted ds are below d.
func countBelow(ds []time.Duration, d time.Duration) int {
	n, _ := slices.BinarySearch(ds, d)
	return n
}

// pct is the p-th percentile of sorted ds.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[(len(ds)-1)*p/100].Round(time.Microsecond)
}

// readOutageCalls reads what outageChild printed: a line a call.
func readOutageCalls(out *bytes.Buffer) ([]outageCall, error) {
	var calls []outageCall
	s := bufio.NewScanner(out)
	for s.Scan() {
		var c outageCall
		var start, end int64
		var ok int
		if _, err := fmt.Sscanf(s.Text(), "call %d %d %d %d %d", &start, &end, &ok, &c.byRedis, &c.calls); err != nil {
			return nil, fmt.Errorf("said %q: %v", s.Text(), err)
		}
		c.start, c.end, c.ok = time.Duration(start), time.Duration(end), ok == 1
		calls = append(calls, c)
	}
	return calls, s.Err()
}

// outageChild is one process of TestOutage: it calls Allow on the hot key
// from outageCallers goroutines from the run's start to its end, and
// prints each call.
func outageChild() int {
	addr, prefix := os.Getenv("MOONREDIS_ADDR"), os.Getenv("MOONREDIS_PREFIX")
	ns, _ := strconv.ParseInt(os.Getenv("MOONREDIS_START"), 10, 64)
	seed, _ := strconv.Atoi(os.Getenv("MOONREDIS_SEED"))
	start := time.Unix(0, ns)
	redis.SetLogger(quiet{}) // the dead Redis is the point
	opts := &redis.Options{Addr: addr}
	if seed == 1 {
		opts.MaxRetries, opts.ContextTimeoutEnabled = -1, true
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	eng := engine.New()
	cfg := Config{Client: rdb, Prefix: prefix, Timeout: outageTimeout, FailMode: FailLocal, ExpectedProcesses: outageProcs}
	b, err := NewBucket(eng, cfg, outageRate, outageBurst)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	time.Sleep(time.Until(start))
	calls := make([][]outageCall, outageCallers)
	var wg sync.WaitGroup
	for g := range outageCallers {
		wg.Go(func() {
			for {
				from := time.Since(start)
				if from >= outageEnd {
					return
				}
				ok := b.Allow("hot")
				end := time.Since(start)
				st := b.Stats()
				calls[g] = append(calls[g], outageCall{start: from, end: end, ok: ok, byRedis: st.Admitted, calls: st.Calls})
				time.Sleep(outagePace)
			}
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := eng.Shutdown(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w := bufio.NewWriter(os.Stdout)
	for _, cs := range calls {
		for _, c := range cs {
			ok := 0
			if c.ok {
				ok = 1
			}
			fmt.Fprintf(w, "call %d %d %d %d %d\n", c.start, c.end, ok, c.byRedis, c.calls)
		}
	}
	w.Flush()
	return 0
}
