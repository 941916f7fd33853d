package moonredis

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The limit the lease processes share: 2,000 a second, bursts of 200.
const (
	leaseRate  = 2000
	leaseBurst = 200
	leaseProcs = 3
	leaseRun   = 3 * time.Second
)

// init runs the test binary as a child of TestLeaseProcesses when asked:
// before TestMain, which runs the other children.
func init() {
	if os.Getenv(childEnv) == "lease" {
		os.Exit(leaseChild())
	}
}

// TestLeaseProcesses: three processes (this test binary, run again),
// each with eight callers asking one key far above its limit, on a real
// redis-server, with leases on. Between them they are let through at
// least 97% of what the limit gives while they ask, and never more than
// it gives from the first call to the last. A process killed (SIGKILL)
// holding a lease loses the fleet at most that lease.
func TestLeaseProcesses(t *testing.T) {
	for _, kill := range []bool{false, true} {
		name := "steady"
		if kill {
			name = "killed"
		}
		t.Run(name, func(t *testing.T) {
			srv := redistest.New(t)
			rdb := realClient(t, srv.Addr())
			prefix := fmt.Sprintf("test:lease:%d:", time.Now().UnixNano())
			// The kill comes a few milliseconds after the killed
			// process says what it holds, within its lease. Should the
			// lease end first, it is given back, and the fleet loses less.
			lease := 50 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), leaseRun+time.Minute)
			defer cancel()
			start := time.Now().Add(500 * time.Millisecond) // time for the processes to start
			t0, err := rdb.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			t0 = t0.Add(time.Until(start)) // no call reaches Redis before start
			outs := make([]bytes.Buffer, leaseProcs)
			errs := make([]error, leaseProcs)
			var wg sync.WaitGroup
			var killedSaid string
			for i := range leaseProcs {
				cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), childEnv+"=lease", "MOONREDIS_ADDR="+srv.Addr(), "MOONREDIS_PREFIX="+prefix,
					fmt.Sprint("MOONREDIS_START=", start.UnixNano()), fmt.Sprint("MOONREDIS_LEASE=", int64(lease)))
				if kill && i == 0 {
					// It stops at a third of the run holding a lease, says
					// what it let through and holds, and is killed.
					cmd.Env = append(cmd.Env, fmt.Sprint("MOONREDIS_PAUSE=", int64(leaseRun/3)))
					out, err := cmd.StdoutPipe()
					if err != nil {
						t.Fatal(err)
					}
					cmd.Stderr = &outs[i]
					if err := cmd.Start(); err != nil {
						t.Fatal(err)
					}
					wg.Go(func() {
						killedSaid, errs[i] = bufio.NewReader(out).ReadString('\n')
						cmd.Process.Signal(syscall.SIGKILL)
						io.Copy(io.Discard, out)
						cmd.Wait()
					})
					continue
				}
				cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
				wg.Go(func() { errs[i] = cmd.Run() })
			}
			wg.Wait()
			t1, err := rdb.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			var total, lost int64
			var from, to time.Time // the first call of any process, and the last
			for i := range leaseProcs {
				said := outs[i].String()
				if kill && i == 0 {
					said = killedSaid
				}
				if errs[i] != nil {
					t.Fatalf("process %d: %v\n%s", i, errs[i], said)
				}
				var admitted, held, failed, first, last int64
				if _, err := fmt.Sscanf(said, "admitted %d held %d failed %d from %d to %d", &admitted, &held, &failed, &first, &last); err != nil {
					t.Fatalf("process %d said %q", i, said)
				}
				if f := time.Unix(0, first); from.IsZero() || f.Before(from) {
					from = f
				}
				if l := time.Unix(0, last); l.After(to) {
					to = l
				}
				if failed != 0 {
					t.Fatalf("process %d: %d requests or lease calls without Redis", i, failed)
				}
				t.Logf("process %d: let through %d, held %d at its end; asked from %v to %v after the start", i, admitted, held,
					time.Unix(0, first).Sub(start).Round(time.Millisecond), time.Unix(0, last).Sub(start).Round(time.Millisecond))
				total += admitted
				if kill && i == 0 {
					if held <= 0 {
						t.Fatalf("the killed process held no lease: %q", said)
					}
					lost = held
				}
			}
			// Every grant came between a process's first call and its
			// last, and Redis's clock is this machine's: the limit gives no
			// more than this, and one token more for rounding.
			most := min(leaseBurst+leaseRate*t1.Sub(t0).Seconds(), leaseBurst+leaseRate*to.Sub(from).Seconds()+1)
			// Each process alone asks far above the limit: the fleet's
			// demand is above it from the first process's first call to
			// the last one's last.
			gives := leaseBurst + leaseRate*to.Sub(from).Seconds()
			t.Logf("let through %d: the limit gives %.0f while they asked, at most %.0f between the first call and the last; %d lost with the killed process", total, gives, most, lost)
			if float64(total) > most {
				t.Errorf("let through %d, above the limit's %.0f", total, most)
			}
			if float64(total) < 0.97*gives-float64(lost) {
				t.Errorf("let through %d, below 97%% of the limit's %.0f while they asked, less the %d the killed process held", total, gives, lost)
			}
		})
	}
}

// leaseChild is a child's whole run: eight callers ask one key until the
// run ends (or, with MOONREDIS_PAUSE, until then, holding a lease), and
// it prints what it let through, what it held and how many requests or
// lease calls Redis did not answer.
func leaseChild() int {
	addr, prefix := os.Getenv("MOONREDIS_ADDR"), os.Getenv("MOONREDIS_PREFIX")
	startNs, _ := strconv.ParseInt(os.Getenv("MOONREDIS_START"), 10, 64)
	leaseNs, _ := strconv.ParseInt(os.Getenv("MOONREDIS_LEASE"), 10, 64)
	pauseNs, _ := strconv.ParseInt(os.Getenv("MOONREDIS_PAUSE"), 10, 64)
	start := time.Unix(0, startNs)
	end := start.Add(leaseRun)
	if pauseNs > 0 {
		end = start.Add(time.Duration(pauseNs))
	}
	eng := engine.New()
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	b, err := NewBucket(eng, Config{Client: rdb, Prefix: prefix, Timeout: time.Second, Lease: time.Duration(leaseNs)}, leaseRate, leaseBurst)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	time.Sleep(time.Until(start))
	first := time.Now()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(end) {
				if d := b.Try("k"); d.OK {
					admitted.Add(1)
				} else {
					time.Sleep(min(d.Wait, time.Millisecond))
				}
			}
		})
	}
	wg.Wait()
	failed := func() int64 { return b.Stats().Fallbacks + b.LeaseStats().Failures }
	if pauseNs > 0 {
		// Hold a lease: once dry, a Try waits for the next grant and
		// draws one of it.
		for deadline := time.Now().Add(5 * time.Second); b.LeaseStats().Held == 0; {
			if time.Now().After(deadline) {
				fmt.Fprintln(os.Stderr, "no lease held after 5 s")
				return 1
			}
			if b.Try("k").OK {
				admitted.Add(1)
			} else {
				time.Sleep(time.Millisecond)
			}
		}
		fmt.Printf("admitted %d held %d failed %d from %d to %d\n", admitted.Load(), b.LeaseStats().Held, failed(), first.UnixNano(), time.Now().UnixNano())
		time.Sleep(time.Minute) // until killed
		return 1
	}
	last := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	eng.Shutdown(ctx)
	fmt.Printf("admitted %d held %d failed %d from %d to %d\n", admitted.Load(), b.LeaseStats().Held, failed(), first.UnixNano(), last.UnixNano())
	return 0
}

// TestLeaseRealDroppedReply: on a real redis-server, a lease call whose
// reply is dropped on the network and which go-redis sends again is
// counted once: after Close gives back what is unspent, Redis holds the
// burst less exactly what was let through.
func TestLeaseRealDroppedReply(t *testing.T) {
	srv := redistest.New(t)
	p := redistest.NewProxy(t, srv.Addr())
	const rate, burst = 1e-6, 1000 // nothing refills
	b, err := NewBucket(realEngine(t), Config{Client: realClient(t, p.Addr()), Timeout: 5 * time.Second, Lease: time.Minute}, rate, burst)
	if err != nil {
		t.Fatal(err)
	}
	let := 0
	ask := func(n int) {
		for range n {
			if b.Allow("k") {
				let++
			}
		}
	}
	ask(20) // the first lease
	if b.LeaseStats().Leases == 0 {
		t.Fatalf("no lease after 20 requests: %+v", b.LeaseStats())
	}
	p.DropNext(1)
	for i := 0; p.Dropped() == 0; i++ { // draws down to the renewal, whose reply is dropped
		if i > 10*burst {
			t.Fatalf("no lease call after %d requests: %+v", i, b.LeaseStats())
		}
		ask(1)
	}
	ask(10)
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ls := b.LeaseStats()
	t.Logf("let through %d; %+v", let, ls)
	look, err := NewBucket(realEngine(t), Config{Client: realClient(t, srv.Addr()), Timeout: 5 * time.Second}, rate, burst)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := look.Tokens("k"), float64(burst-let); got < want-0.01 || got > want+0.01 {
		t.Errorf("Redis holds %v after Close, want the burst less the %d let through: %v", got, let, want)
	}
}
