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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
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
	// A lease child says, for each slot of this width from the common
	// start, whether it ran and how many it let through.
	leaseSlot  = 5 * time.Millisecond
	leaseSlots = int((leaseRun + 2*time.Second) / leaseSlot)
	// A process that does not run for this many slots in a row (20 ms
	// or more) does not ask meanwhile.
	leaseStop = 4
	// How long the bucket takes to fill from empty.
	leaseFill = time.Duration(leaseBurst * float64(time.Second) / leaseRate)
)

// init runs the test binary as a child of TestLeaseProcesses when asked:
// before TestMain, which runs the other children.
func init() {
	if os.Getenv(childEnv) == "lease" {
		os.Exit(leaseChild())
	}
}

// leaseSaid is what a lease child says: its counts; when its first
// request began, when its last one ended and when its last one began
// (Unix nanoseconds); and for each slot from the start the requests it
// let through, or -1 if it did not run, and whether a call it sent to
// Redis went unanswered for leaseStop slots or more across it (late).
type leaseSaid struct {
	admitted, held, failed int64
	first, last, end       int64
	slots                  []int64
	late                   []bool
}

// parseLeaseSaid reads a lease child's two lines.
func parseLeaseSaid(s string) (leaseSaid, error) {
	var d leaseSaid
	head, rest, _ := strings.Cut(s, "\n")
	if _, err := fmt.Sscanf(head, "admitted %d held %d failed %d asked %d to %d end %d", &d.admitted, &d.held, &d.failed, &d.first, &d.last, &d.end); err != nil {
		return d, err
	}
	slots, ok := strings.CutPrefix(strings.TrimSpace(rest), "slots ")
	if !ok {
		return d, fmt.Errorf("no slots")
	}
	for _, f := range strings.Fields(slots) {
		n := int64(-1)
		f, late := strings.CutPrefix(f, "r")
		if f != "." {
			var err error
			if n, err = strconv.ParseInt(f, 10, 64); err != nil {
				return d, err
			}
		}
		d.slots = append(d.slots, n)
		d.late = append(d.late, late)
	}
	if len(d.slots) != leaseSlots {
		return d, fmt.Errorf("%d slots, want %d", len(d.slots), leaseSlots)
	}
	return d, nil
}

// TestLeaseProcesses: three processes (this test binary, run again),
// each with eight callers asking one key far above its limit, on a real
// redis-server, with leases on. While they ask, they are let through at
// least 97% of what the limit gives, and never more than it gives from
// the first call to the last. A process killed (SIGKILL) holding a lease
// loses the fleet at most that lease.
//
// A process asks from its first request's start to its last one's,
// except while it does not run at all: a loaded machine can stop a
// process for tens of milliseconds, and then it has no demand. It can
// stop redis-server too, and then no call is answered. Each process
// says, in slots of a few milliseconds, whether it ran and whether Redis
// kept a call of its waiting; the limit is counted over the slots in
// which at least one process asked and Redis answered it, and over each
// span between them in which none did, up to the time the bucket takes
// to fill: what it refills meanwhile waits in it for the next ask. Every
// request let through from the first ask on counts, in whatever slot:
// a lease is drawn in a burst, not at the rate.
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
						r := bufio.NewReader(out)
						var head, slots string
						if head, errs[i] = r.ReadString('\n'); errs[i] == nil {
							slots, errs[i] = r.ReadString('\n')
						}
						killedSaid = head + slots
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
			said := make([]leaseSaid, leaseProcs)
			for i := range leaseProcs {
				out := outs[i].String()
				if kill && i == 0 {
					out = killedSaid
				}
				if errs[i] != nil {
					t.Fatalf("process %d: %v\n%s", i, errs[i], out)
				}
				d, err := parseLeaseSaid(out)
				if err != nil {
					t.Fatalf("process %d said %q: %v", i, out, err)
				}
				said[i] = d
				if f := time.Unix(0, d.first); from.IsZero() || f.Before(from) {
					from = f
				}
				if l := time.Unix(0, d.last); l.After(to) {
					to = l
				}
				if d.failed != 0 {
					t.Fatalf("process %d: %d requests or lease calls without Redis", i, d.failed)
				}
				t.Logf("process %d: let through %d, held %d at its end; asked from %v to %v after the start", i, d.admitted, d.held,
					time.Unix(0, d.first).Sub(start).Round(time.Millisecond), time.Unix(0, d.end).Sub(start).Round(time.Millisecond))
				total += d.admitted
				if kill && i == 0 {
					if d.held <= 0 {
						t.Fatalf("the killed process held no lease: %q", out)
					}
					lost = d.held
				}
			}
			// Every grant came between a process's first call and its
			// last, and Redis's clock is this machine's: the limit gives no
			// more than this, and one token more for rounding.
			most := min(leaseBurst+leaseRate*t1.Sub(t0).Seconds(), leaseBurst+leaseRate*to.Sub(from).Seconds()+1)
			t.Logf("let through %d, at most %.0f between the first call and the last", total, most)
			if float64(total) > most {
				t.Errorf("let through %d, above the limit's %.0f", total, most)
			}
			// Each process alone asks far above the limit: while one
			// asks, the fleet's demand is above it.
			asked, idle, let := leaseAsked(said, start)
			if asked < leaseRun/3 {
				t.Fatalf("the processes asked only %v of the %v run: too little to measure", asked, leaseRun)
			}
			gives := leaseBurst + leaseRate*(asked+idle).Seconds()
			t.Logf("while they asked (%v of %v from the first ask to the last, and %v refilling between), let through %d: the limit gives %.0f; %d lost with the killed process",
				asked.Round(time.Millisecond), to.Sub(from).Round(time.Millisecond), idle.Round(time.Millisecond), let, gives, lost)
			if float64(let) < 0.97*gives-float64(lost) {
				t.Errorf("let through %d while they asked, below 97%% of the limit's %.0f, less the %d the killed process held", let, gives, lost)
			}
		})
	}
}

// leaseAsked is how long, in the slots after start, some process that
// had begun asking and had not ended was asking while Redis answered it;
// how long the bucket refilled between those slots, from the first ask
// on (each span in which none asked counts up to leaseFill: a bucket that
// is full refills no more); and how many were let through from the first
// ask to the last slot in which one asked, in every slot. A process ends
// with its last request's start. It stops asking while it does not run
// for leaseStop slots or more in a row: after a shorter stop its lease
// and the bucket in Redis still hold what it did not take meanwhile. It
// does not ask either in a slot in which Redis kept a call of its waiting
// leaseStop slots or more; another that Redis answered still does.
//
// Requests let through in a slot that does not count still count: they
// drew on tokens the limit gave in the slots that do (a lease is drawn in
// a burst, the bucket's burst at once), and what the bucket refilled in
// the span is counted up to a fill.
func leaseAsked(said []leaseSaid, start time.Time) (asked, idle time.Duration, let int64) {
	slotOf := func(ns int64) int { return int(time.Unix(0, ns).Sub(start) / leaseSlot) }
	off := make([][]bool, len(said)) // the slots in which a process does not ask
	begin := leaseSlots
	for i, d := range said {
		begin = min(begin, max(slotOf(d.first), 0))
		off[i] = make([]bool, leaseSlots)
		for s := 0; s < leaseSlots; {
			n := 0
			for s+n < leaseSlots && d.slots[s+n] == -1 {
				n++
			}
			if n >= leaseStop {
				for k := range n {
					off[i][s+k] = true
				}
			}
			s += max(n, 1)
		}
		for s, late := range d.late {
			off[i][s] = off[i][s] || late
		}
	}
	var gap time.Duration // the span since the last slot that counted
	var held int64        // let through in it
	for s := begin; s < leaseSlots; s++ {
		lo, hi := start.Add(time.Duration(s)*leaseSlot).UnixNano(), start.Add(time.Duration(s+1)*leaseSlot).UnixNano()
		some := false
		var from, to int64 // the part of the slot in which one asked
		for i, d := range said {
			held += max(d.slots[s], 0)
			if s < slotOf(d.first) || s > slotOf(d.end) || off[i][s] {
				continue
			}
			a, b := max(lo, d.first), min(hi, d.end)
			if !some || a < from {
				from = a
			}
			if !some || b > to {
				to = b
			}
			some = true
		}
		if !some || from >= to {
			gap += leaseSlot
			continue
		}
		asked += time.Duration(to - from)
		idle += min(gap, leaseFill)
		let += held
		gap, held = 0, 0
	}
	return asked, idle, let
}

// leaseChild is a child's whole run: eight callers ask one key until the
// run ends (or, with MOONREDIS_PAUSE, until then, holding a lease), and
// it prints what it let through, what it held, how many requests or
// lease calls Redis did not answer, and when it asked; and then, for each
// slot from the start, how many it let through in it, or "." if it did
// not run in it (no request began, and a ticker that wakes each
// millisecond did not wake), with an "r" before it if a call it sent to
// Redis went unanswered for leaseStop slots or more across it.
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
	// A cold process's first calls wait for new connections and for Redis
	// to load the scripts: on a loaded machine, tens of milliseconds in
	// which the fleet lets nothing through while the bucket, full,
	// refills into nothing. That is a client starting, not leasing: open
	// the connections the calls will use and load the scripts before the
	// common start, before the hook that watches for late calls.
	leaseWarm(rdb, start)
	var ran, let, late [leaseSlots]atomic.Int64
	slot := func(at time.Time) int { return min(max(int(at.Sub(start)/leaseSlot), 0), leaseSlots-1) }
	answered := func(sent time.Time) {
		if now := time.Now(); now.Sub(sent) >= leaseStop*leaseSlot {
			for s := slot(sent); s <= slot(now); s++ {
				late[s].Add(1)
			}
		}
	}
	rdb.AddHook(hook{
		process: func(next redis.ProcessHook) redis.ProcessHook {
			return func(ctx context.Context, cmd redis.Cmder) error {
				defer answered(time.Now())
				return next(ctx, cmd)
			}
		},
		pipeline: func(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
			return func(ctx context.Context, cmds []redis.Cmder) error {
				defer answered(time.Now())
				return next(ctx, cmds)
			}
		},
	})
	// A loaded machine can stop a process for most of a second: a
	// Timeout well above that keeps a stop from failing a call.
	b, err := NewBucket(eng, Config{Client: rdb, Prefix: prefix, Timeout: 5 * time.Second, Lease: time.Duration(leaseNs)}, leaseRate, leaseBurst)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var first, last, ended atomic.Int64 // the first request's start, the last one's end, the last one's start
	later := func(v *atomic.Int64, ns int64) {
		for old := v.Load(); ns > old && !v.CompareAndSwap(old, ns); old = v.Load() {
		}
	}
	try := func() client.Decision {
		at := time.Now()
		ran[slot(at)].Add(1)
		first.CompareAndSwap(0, at.UnixNano())
		later(&ended, at.UnixNano())
		d := b.Try("k")
		done := time.Now()
		later(&last, done.UnixNano())
		if d.OK {
			let[slot(done)].Add(1)
		}
		return d
	}
	ticking := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		for {
			select {
			case <-ticking:
				return
			case <-time.After(time.Millisecond):
				ran[slot(time.Now())].Add(1)
			}
		}
	}()
	say := func(admitted int64) {
		close(ticking)
		<-ticked
		failed := b.Stats().Fallbacks + b.LeaseStats().Failures
		var line strings.Builder
		line.WriteString("slots")
		for s := range leaseSlots {
			switch {
			case ran[s].Load() == 0:
				line.WriteString(" .")
			case late[s].Load() != 0:
				fmt.Fprintf(&line, " r%d", let[s].Load())
			default:
				fmt.Fprintf(&line, " %d", let[s].Load())
			}
		}
		fmt.Printf("admitted %d held %d failed %d asked %d to %d end %d\n%s\n", admitted, b.LeaseStats().Held, failed,
			first.Load(), last.Load(), ended.Load(), line.String())
	}
	time.Sleep(time.Until(start))
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(end) {
				if d := try(); d.OK {
					admitted.Add(1)
				} else {
					time.Sleep(min(d.Wait, time.Millisecond))
				}
			}
		})
	}
	wg.Wait()
	if pauseNs > 0 {
		// Hold a lease: once dry, a Try waits for the next grant and
		// draws one of it.
		for deadline := time.Now().Add(5 * time.Second); b.LeaseStats().Held == 0; {
			if time.Now().After(deadline) {
				fmt.Fprintln(os.Stderr, "no lease held after 5 s")
				return 1
			}
			if try().OK {
				admitted.Add(1)
			} else {
				time.Sleep(time.Millisecond)
			}
		}
		say(admitted.Load())
		time.Sleep(time.Minute) // until killed
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Close(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	eng.Shutdown(ctx)
	say(admitted.Load())
	return 0
}

// leaseWarm opens as many connections of rdb as a lease child's calls
// use at once (MaxCalls, a lease call and a give-back, and to spare), and
// loads the scripts they run, by start.
func leaseWarm(rdb *redis.Client, start time.Time) {
	ctx, cancel := context.WithDeadline(context.Background(), start)
	defer cancel()
	conns := make([]*redis.Conn, 8)
	for i := range conns {
		conns[i] = rdb.Conn()
		conns[i].Ping(ctx)
	}
	for _, c := range conns {
		c.Close()
	}
	for _, s := range []*redis.Script{bucketScript, bucketKeys, leaseScript} {
		s.Load(ctx, rdb)
	}
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

// TestLeaseAsked: the span TestLeaseProcesses counts the limit over is
// from the first request's start to the last one's, less the slots in
// which no process asked: each process was stopped for leaseStop slots
// or more in a row, or had not begun, or had ended, or Redis kept a call
// waiting. A shorter stop counts as asking.
func TestLeaseAsked(t *testing.T) {
	start := time.Unix(100, 0)
	at := func(slot int) int64 { return start.Add(time.Duration(slot) * leaseSlot).UnixNano() }
	// proc runs from slot a to slot b, not at all in stops, and lets
	// one through in each slot it runs in.
	proc := func(a, b int, stops ...[2]int) leaseSaid {
		d := leaseSaid{first: at(a), end: at(b), slots: make([]int64, leaseSlots), late: make([]bool, leaseSlots)}
		for s := range d.slots {
			if s < a || s >= b {
				d.slots[s] = -1
			} else {
				d.slots[s] = 1
			}
		}
		for _, st := range stops {
			for s := st[0]; s < st[1]; s++ {
				d.slots[s] = -1
			}
		}
		return d
	}
	// late marks slots a to b of d as Redis keeping a call waiting.
	late := func(d leaseSaid, a, b int) leaseSaid {
		for s := a; s < b; s++ {
			d.late[s] = true
		}
		return d
	}
	// burst makes d let n through in slot s.
	burst := func(d leaseSaid, s int, n int64) leaseSaid {
		d.slots[s] = n
		return d
	}
	fill := int(leaseFill / leaseSlot)
	for _, c := range []struct {
		name        string
		said        []leaseSaid
		asked, idle int // slots
		let         int64
	}{
		{"one asking throughout", []leaseSaid{proc(0, 20)}, 20, 0, 20},
		{"a short stop asks", []leaseSaid{proc(0, 20, [2]int{5, 5 + leaseStop - 1})}, 20, 0, 20 - leaseStop + 1},
		{"a long stop does not", []leaseSaid{proc(0, 20, [2]int{5, 5 + leaseStop})}, 20 - leaseStop, leaseStop, 20 - leaseStop},
		{"one asks while the other stops", []leaseSaid{proc(0, 20, [2]int{5, 15}), proc(0, 20)}, 20, 0, 30},
		{"both stop", []leaseSaid{proc(0, 20, [2]int{5, 15}), proc(0, 20, [2]int{10, 15})}, 15, 5, 25},
		{"late and early ones", []leaseSaid{proc(0, 10), proc(10+fill, 20+fill)}, 20, fill, 20},
		{"a long span refills one fill", []leaseSaid{proc(0, 10), proc(10+2*fill, 20+2*fill)}, 20, fill, 20},
		{"overlapping", []leaseSaid{proc(0, 10), proc(5, 20)}, 20, 0, 25},
		{"Redis late for one", []leaseSaid{proc(0, 20), late(proc(0, 20), 5, 9)}, 20, 0, 40},
		{"Redis late for all", []leaseSaid{late(proc(0, 20), 5, 9), late(proc(0, 20), 5, 9)}, 16, 4, 40},
		{"a burst while Redis is late", []leaseSaid{burst(late(proc(0, 20), 5, 9), 8, 60)}, 16, 4, 20 - 1 + 60},
		{"a late first call", []leaseSaid{late(proc(0, 20), 0, 4)}, 16, 4, 20},
		{"a late last call", []leaseSaid{late(proc(0, 20), 16, 20)}, 16, 0, 16},
	} {
		t.Run(c.name, func(t *testing.T) {
			asked, idle, let := leaseAsked(c.said, start)
			if want := time.Duration(c.asked) * leaseSlot; asked != want || idle != time.Duration(c.idle)*leaseSlot || let != c.let {
				t.Errorf("asked %v, idle %v, let %d; want %v, %v, %d", asked, idle, let, want, time.Duration(c.idle)*leaseSlot, c.let)
			}
		})
	}
}
