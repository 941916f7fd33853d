package moonredis

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
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
	outageBreaker = 3                    // failed calls in a row that trip the breaker
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
// through in that process and how many calls it had sent to Redis. trips
// and closes count the breaker's trips and closes when the call began.
type outageCall struct {
	start, end    time.Duration
	ok            bool
	byRedis       int64
	calls         int64
	trips, closes int64
}

// tripped says whether the breaker was tripped when c began.
func (c outageCall) tripped() bool { return c.trips > c.closes }

// TestOutage: three processes share a limit on a real redis-server, which
// is killed for 2 s and started again on the same port. Two use
// go-redis's default retries, one none (MaxRetries -1) and
// ContextTimeoutEnabled. Each process's breaker trips after a few calls
// wait for the dead Redis, and stays tripped until Redis is started
// again. Meanwhile the local share answers all but two calls in a hundred
// in under a millisecond, and none waits a quarter of the Timeout. From
// the kill on, the fleet never lets through more than the limit plus one
// burst in any stretch of time, the limit being the bucket's rate over
// the stretch plus its burst. Redis lets requests through again once it
// is back.
//
// A machine shared with other work may hold a process back for a while,
// so calls are judged by whether the breaker had tripped in their process
// when they began, not by a fixed time after the kill; and the slow calls
// are counted, not each one failed.
func TestOutage(t *testing.T) {
	srv := redistest.New(t)
	prefix := fmt.Sprintf("test:%d:", time.Now().UnixNano())
	outs := make([]bytes.Buffer, outageProcs)
	logs := make([]bytes.Buffer, outageProcs)
	errs := make([]error, outageProcs)
	ins := make([]io.WriteCloser, outageProcs)
	ready := make(chan error, outageProcs)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), outageEnd+time.Minute) // ends a process that hangs
	defer cancel()
	for i := range outageProcs {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=outage", "MOONREDIS_ADDR="+srv.Addr(), "MOONREDIS_PREFIX="+prefix,
			fmt.Sprint("MOONREDIS_SEED=", i))
		cmd.Stderr = &logs[i]
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ins[i] = in
		wg.Go(func() {
			r := bufio.NewReader(out)
			line, err := r.ReadString('\n')
			if line == "ready\n" {
				err = nil
			} else {
				err = fmt.Errorf("process %d said %q, not that it was ready: %v", i, line, err)
			}
			ready <- err
			_, err = io.Copy(&outs[i], r)
			if err2 := cmd.Wait(); err == nil {
				err = err2
			}
			errs[i] = err
		})
	}
	// Each process says when it is ready to call, and the run starts once
	// all are: a machine slow to start a process does not shorten its run.
	// A process that never says so ends with ctx.
	for range outageProcs {
		if err := <-ready; err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now().Add(20 * time.Millisecond)
	for _, in := range ins {
		fmt.Fprintln(in, start.UnixNano())
		in.Close()
	}
	time.Sleep(time.Until(start.Add(outageKill)))
	srv.Kill()
	killed := time.Since(start) // no call that begins after this reaches the old server
	time.Sleep(time.Until(start.Add(outageBack)))
	restarting := time.Since(start) // no call that ends before this reaches the new one
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Since(start)
	wg.Wait()
	t.Logf("Redis killed at %v, started again at %v, answering at %v", killed.Round(time.Millisecond),
		restarting.Round(time.Millisecond), back.Round(time.Millisecond))

	var all []outageCall // admitted by the fleet, begun after the kill
	for i := range outageProcs {
		if errs[i] != nil {
			t.Fatalf("process %d: %v\n%s", i, errs[i], logs[i].String())
		}
		calls, err := readOutage(&outs[i])
		if err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
		slices.SortFunc(calls, func(a, b outageCall) int { return int(a.start - b.start) })
		var before, waited, after []outageCall // in the outage: begun with the breaker closed, of those the ones that waited for Redis, begun with it tripped
		var redisBefore, redisAfter int64
		closes := int64(-1) // the breaker's closes when the first call of the outage began
		for _, c := range calls {
			switch {
			case c.start < killed:
				redisBefore = max(redisBefore, c.byRedis)
			case c.end < restarting:
				if closes < 0 {
					closes = c.closes
				}
				if c.closes != closes {
					t.Errorf("process %d: the breaker closed while Redis was down: %d closes by %v after the kill, %d at first",
						i, c.closes, (c.start - killed).Round(time.Millisecond), closes)
					closes = c.closes
				}
				if c.tripped() {
					after = append(after, c)
					break
				}
				before = append(before, c)
				if c.end-c.start >= outageTimeout/2 {
					waited = append(waited, c)
				}
			}
			if c.start >= killed && c.ok {
				all = append(all, c)
			}
			redisAfter = max(redisAfter, c.byRedis)
		}
		if len(after) == 0 {
			t.Errorf("process %d: its breaker never tripped while Redis was down (%d calls in the outage)", i, len(before))
			continue
		}
		tripped := after[0].start - killed

		// A few calls wait for the dead Redis: those in the call out when
		// it died, and those in the failed calls that trip the breaker.
		// Each caller waits in each of them at most once.
		if most := outageCallers * (outageBreaker + 1); len(waited) > most {
			t.Errorf("process %d: %d calls in the outage waited for the dead Redis with the breaker closed, want at most %d; it first tripped %v after the kill",
				i, len(waited), most, tripped.Round(time.Millisecond))
		}

		// Once the breaker trips, it answers at once, and no request goes
		// to Redis: only the probes, one a Timeout.
		var took []time.Duration
		lo, hi := int64(math.MaxInt64), int64(0) // the calls to Redis so far
		for _, c := range after {
			lo, hi = min(lo, c.calls), max(hi, c.calls)
			took = append(took, c.end-c.start)
		}
		if probes := int64((restarting-killed-tripped)/outageTimeout) + 1; hi-lo > probes {
			t.Errorf("process %d sent %d calls to Redis in the outage once its breaker tripped, want at most %d probes", i, hi-lo, probes)
		}
		slices.Sort(took)
		slow := len(took) - countBelow(took, time.Millisecond)
		t.Logf("process %d: breaker tripped %v after the kill, %d calls waited for Redis before; %d calls after, median %v, 99th percentile %v, %d over 1ms, slowest %v; %d probes; Redis let through %d before the kill, %d after it came back",
			i, tripped.Round(time.Millisecond), len(waited), len(took), pct(took, 50), pct(took, 99), slow, pct(took, 100),
			hi-lo, redisBefore, redisAfter-redisBefore)
		// A call that waited for the dead Redis would take the Timeout.
		// The machine's own stalls (three processes on two cores, under
		// -race) put a call or two in a hundred over a millisecond.
		if len(took) < 200 {
			t.Errorf("process %d made only %d calls in the outage once its breaker tripped, want hundreds", i, len(took))
		} else if slow > len(took)/50 || pct(took, 100) > outageTimeout/4 {
			t.Errorf("process %d: %d of %d calls once its breaker tripped took over a millisecond, the slowest %v; want at most two in a hundred, none over %v",
				i, slow, len(took), pct(took, 100), outageTimeout/4)
		}
		if redisAfter == redisBefore {
			t.Errorf("process %d: Redis let nothing through once it was back", i)
		}
	}

	// The limit in a stretch of time is what the bucket itself lets
	// through: its rate over the stretch, and its burst. From the kill on,
	// the fleet may let through one burst more: the local shares start
	// full, and so does Redis, which comes back with no state. Every
	// stretch from an admission to a later one, both begun after the kill,
	// is checked.
	limit := func(d time.Duration) float64 { return outageRate*d.Seconds() + outageBurst }
	slices.SortFunc(all, func(a, b outageCall) int { return int(a.end - b.end) })
	worst, at := math.Inf(-1), time.Duration(0) // the most let through over the limit, and where
	for i := range all {
		for j := i; j < len(all); j++ {
			if over := float64(j-i+1) - limit(all[j].end-all[i].end); over > worst {
				worst, at = over, all[i].end
			}
		}
	}
	span := all[len(all)-1].end - killed
	t.Logf("the fleet let through %d from the kill on, in %v: %.1f a second against a rate of %v; the most over the limit (%v a second plus a burst of %v) in any stretch: %.1f, from %v",
		len(all), span.Round(time.Millisecond), float64(len(all))/span.Seconds(), outageRate, outageRate, outageBurst, worst, at.Round(time.Millisecond))
	if worst > outageBurst {
		t.Errorf("the fleet let through %.1f over the limit (%v a second plus a burst of %v) in the stretch from %v, want at most one burst over",
			worst, outageRate, outageBurst, at.Round(time.Millisecond))
	}
}

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

// readOutage reads what outageChild printed: a line a call.
func readOutage(out *bytes.Buffer) ([]outageCall, error) {
	var calls []outageCall
	s := bufio.NewScanner(out)
	for s.Scan() {
		var c outageCall
		var start, end int64
		var ok int
		if _, err := fmt.Sscanf(s.Text(), "call %d %d %d %d %d %d %d", &start, &end, &ok, &c.byRedis, &c.calls, &c.trips, &c.closes); err != nil {
			return nil, fmt.Errorf("said %q: %v", s.Text(), err)
		}
		c.start, c.end, c.ok = time.Duration(start), time.Duration(end), ok == 1
		calls = append(calls, c)
	}
	return calls, s.Err()
}

// outageChild is one process of TestOutage. Once its limiter is built it
// says it is ready, then reads the run's start from its input. It calls
// Allow on the hot key from outageCallers goroutines from the run's start
// to its end, then prints each call.
func outageChild() int {
	addr, prefix := os.Getenv("MOONREDIS_ADDR"), os.Getenv("MOONREDIS_PREFIX")
	seed, _ := strconv.Atoi(os.Getenv("MOONREDIS_SEED"))
	redis.SetLogger(quiet{}) // the dead Redis is the point
	opts := &redis.Options{Addr: addr}
	if seed == 1 {
		opts.MaxRetries, opts.ContextTimeoutEnabled = -1, true
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	eng := engine.New()
	cfg := Config{Client: rdb, Prefix: prefix, Timeout: outageTimeout, FailMode: FailLocal, ExpectedProcesses: outageProcs,
		BreakerFailures: outageBreaker}
	b, err := NewBucket(eng, cfg, outageRate, outageBurst)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	var ns int64
	if _, err := fmt.Fscan(os.Stdin, &ns); err != nil {
		fmt.Fprintln(os.Stderr, "no start:", err)
		return 1
	}
	start := time.Unix(0, ns)
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
				trips, closes := b.l.trips.Load(), b.l.closes.Load()
				ok := b.Allow("hot")
				end := time.Since(start)
				st := b.Stats()
				calls[g] = append(calls[g], outageCall{start: from, end: end, ok: ok, byRedis: st.Admitted, calls: st.Calls, trips: trips, closes: closes})
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
			fmt.Fprintf(w, "call %d %d %d %d %d %d %d\n", c.start, c.end, ok, c.byRedis, c.calls, c.trips, c.closes)
		}
	}
	w.Flush()
	return 0
}
