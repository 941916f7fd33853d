package moonredis

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The fleet TestFleetBackendOutage runs: fleetProcs processes, each one
// replica with a pool of fleetSize connections to one TCP backend and
// fleetWorkers goroutines using them, on a real redis-server.
const (
	fleetProcs   = 4
	fleetSize    = 4
	fleetWorkers = 4
	fleetEvery   = 50 * time.Millisecond // FleetConfig.ProbeEvery
)

// The run's schedule, from its start: the backend dies at fleetKill and
// answers again at fleetBack; the processes stop at fleetEnd.
const (
	fleetKill = 1200 * time.Millisecond // a healthy stretch of about five heartbeats, four of them counted, so a stalled process still sends one
	fleetBack = fleetKill + 1500*time.Millisecond
	fleetEnd  = fleetBack + 600*time.Millisecond
)

// fleetSettle is how long after the kill the fleet may take to hold:
// every replica finds its connections dead, and three report.
const fleetSettle = 200 * time.Millisecond

// fleetGrace is how late a use that worked before the kill may note its
// time, on a machine shared with other work.
const fleetGrace = 50 * time.Millisecond

// fleetBeat is the replicas' FleetConfig.Heartbeat: short, so that the
// healthy stretch holds a few.
const fleetBeat = 250 * time.Millisecond

// backend is a TCP server that greets each connection with one byte and
// then answers each byte it reads with one. Dead, it closes every
// connection, and each new one at once, which it counts: a make that
// reached the dead backend.
type backend struct {
	ln   net.Listener
	dead atomic.Bool
	wg   sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	tries []time.Time // when each connection came while dead
	opens []time.Time // when each connection came while alive
}

func newBackend(t *testing.T) *backend {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{ln: ln, conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(func() {
		ln.Close()
		b.kill()
		b.wg.Wait()
	})
	return b
}

func (b *backend) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		if b.dead.Load() {
			b.tries = append(b.tries, time.Now())
			b.mu.Unlock()
			c.Close()
			continue
		}
		b.conns[c] = struct{}{}
		b.opens = append(b.opens, time.Now())
		b.mu.Unlock()
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer c.Close()
			buf := []byte{'+'}
			if _, err := c.Write(buf); err != nil {
				return
			}
			for {
				if _, err := c.Read(buf); err != nil {
					return
				}
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
}

// kill makes the backend dead: its connections close, and new ones are
// closed as they come.
func (b *backend) kill() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dead.Store(true)
	for c := range b.conns {
		c.Close()
	}
	clear(b.conns)
}

// revive makes the backend answer again.
func (b *backend) revive() { b.dead.Store(false) }

// TestFleetBackendOutage: four processes (this test binary, run again),
// each a replica of one pool with the fleet on a real redis-server, use a
// TCP backend that dies for 1.5 s and returns. While it is dead the fleet
// sends it about one probe each ProbeEvery, not one per replica; when it
// returns, every replica's first success comes within a few ProbeEvery;
// and while it was healthy, no replica sent Redis anything but its
// heartbeats.
func TestFleetBackendOutage(t *testing.T) {
	srv := redistest.New(t)
	be := newBackend(t)
	name := fmt.Sprint("outage-", time.Now().UnixNano())
	outs := make([]bytes.Buffer, fleetProcs)
	errs := make([]error, fleetProcs)
	ctx, cancel := context.WithTimeout(context.Background(), fleetEnd+30*time.Second)
	defer cancel()
	// Each process says when it is ready on a pipe of its own, and hears
	// the run's start on its stdin: a process slow to start on a busy
	// machine holds the start back rather than missing part of the run.
	var wg sync.WaitGroup
	ready := make(chan error, fleetProcs)
	gos := make([]io.WriteCloser, fleetProcs)
	for i := range fleetProcs {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=fleet", "MOONREDIS_ADDR="+srv.Addr(), "MOONREDIS_BACKEND="+be.ln.Addr().String(),
			"MOONREDIS_PREFIX="+name, fmt.Sprint("MOONREDIS_SEED=", i))
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.ExtraFiles = []*os.File{w}
		if gos[i], err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		go func() {
			defer r.Close()
			line, err := bufio.NewReader(r).ReadString('\n')
			if err == nil && line != "ready\n" {
				err = fmt.Errorf("said %q", line)
			}
			ready <- err
		}()
		wg.Go(func() { errs[i] = cmd.Wait() })
	}
	for range fleetProcs {
		select {
		case err := <-ready:
			if err != nil {
				cancel()
				wg.Wait()
				t.Fatalf("a process did not get ready: %v\n%s", err, &outs[0])
			}
		case <-ctx.Done():
			wg.Wait()
			t.Fatal("the processes did not get ready in time")
		}
	}
	start := time.Now().Add(50 * time.Millisecond)
	for _, g := range gos {
		fmt.Fprintln(g, start.UnixNano())
		g.Close()
	}
	time.Sleep(time.Until(start.Add(fleetKill)))
	be.kill()
	killed := time.Now()
	time.Sleep(time.Until(start.Add(fleetBack)))
	be.revive()
	back := time.Now()
	wg.Wait()

	var firsts []time.Duration
	for i := range fleetProcs {
		if errs[i] != nil {
			t.Fatalf("process %d: %v\n%s", i, errs[i], outs[i].String())
		}
		var r fleetRun
		if err := r.read(&outs[i]); err != nil {
			t.Fatalf("process %d: %v\n%s", i, err, outs[i].String())
		}
		var first time.Duration = -1
		for _, at := range r.oks {
			if at.After(killed.Add(fleetGrace)) && at.Before(back) {
				t.Errorf("process %d: a use worked %v after the kill, while the backend was dead", i, at.Sub(killed))
			}
			if at.After(back) && first < 0 {
				first = at.Sub(back)
			}
		}
		if first < 0 {
			t.Errorf("process %d: no use worked after the backend returned", i)
			continue
		}
		firsts = append(firsts, first)
		t.Logf("process %d: first success %v after the return; healthy: %d heartbeats, %d other calls to Redis; %d leases, %d probes, %d holds, %d recoveries; pool held by the fleet %d times, by the ramp %d",
			i, first.Round(100*time.Microsecond), r.syncs, r.others, r.leases, r.probes, r.holds, r.recoveries, r.heldFleet, r.heldRamp)
		if r.syncs == 0 || r.others != 0 {
			t.Errorf("process %d sent Redis %d heartbeats and %d other calls while the backend was healthy, want a heartbeat a %v and nothing else", i, r.syncs, r.others, fleetBeat)
		}
		if r.holds != 1 || r.recoveries != 1 {
			t.Errorf("process %d heard of %d holds and %d recoveries, want one of each", i, r.holds, r.recoveries)
		}
	}
	slices.Sort(firsts)
	if len(firsts) > 0 {
		t.Logf("return to first success, per replica: %v", firsts)
		// The fleet probes once a ProbeEvery: the return waits for the next
		// probe, then every replica hears of it at once. Two ProbeEvery of
		// slack for a machine shared with other work.
		if worst := firsts[len(firsts)-1]; worst > 3*fleetEvery {
			t.Errorf("the last replica's first success came %v after the return, want within %v", worst, 3*fleetEvery)
		}
	}

	// The makes that reached the dead backend once the fleet held, and the
	// new connections in the first 100 ms after it returned.
	be.mu.Lock()
	tries, opens := slices.Clone(be.tries), slices.Clone(be.opens)
	be.mu.Unlock()
	early := 0
	for _, at := range opens {
		if !at.Before(back) && at.Sub(back) < 100*time.Millisecond {
			early++
		}
	}
	// Each replica may make one at once, and the fleet the curve's share.
	ramp := float64(fleetProcs) + client.Ramp{}.Allows(100*time.Millisecond)
	t.Logf("the backend took %d new connections in the first 100ms after its return; the ramp allows %.1f, and %d replicas of %d connections each want %d",
		early, ramp, fleetProcs, fleetSize, fleetProcs*fleetSize)
	if float64(early) > ramp+2 { // the probe, and one more the ramp may let through a moment early
		t.Errorf("%d new connections in the first 100ms after the return, want no more than the ramp's %.1f", early, ramp)
	}
	from, to := killed.Add(fleetSettle), back
	var held []time.Time
	for _, at := range tries {
		if !at.Before(from) && at.Before(to) {
			held = append(held, at)
		}
	}
	intervals := float64(to.Sub(from)) / float64(fleetEvery)
	most := 0 // the most in any stretch of one ProbeEvery
	for i := range held {
		n := 0
		for j := i; j < len(held) && held[j].Sub(held[i]) < fleetEvery; j++ {
			n++
		}
		most = max(most, n)
	}
	t.Logf("the dead backend saw %d makes in all, %d in the %v after the fleet held: %.2f a ProbeEvery (%v), at most %d within one",
		len(tries), len(held), to.Sub(from).Round(time.Millisecond), float64(len(held))/intervals, fleetEvery, most)
	if float64(len(held)) > intervals+2 {
		t.Errorf("%d makes reached the dead backend in %.0f ProbeEvery once the fleet held, want one each", len(held), intervals)
	}
	if float64(len(held)) < intervals/3 {
		t.Errorf("only %d makes reached the dead backend in %.0f ProbeEvery: the fleet hardly probed", len(held), intervals)
	}
	if most > 2 {
		t.Errorf("%d makes reached the dead backend within one ProbeEvery", most)
	}
}

// fleetRun is what one process of TestFleetBackendOutage saw.
type fleetRun struct {
	syncs, others                     int // calls to Redis while the backend was healthy
	leases, probes, holds, recoveries int64
	heldFleet, heldRamp               int64
	oks                               []time.Time // when each use that worked ended, from shortly before the kill
}

func (r *fleetRun) read(out *bytes.Buffer) error {
	s := bufio.NewScanner(out)
	found := false
	for s.Scan() {
		var at int64
		if _, err := fmt.Sscanf(s.Text(), "ok %d", &at); err == nil {
			r.oks = append(r.oks, time.Unix(0, at))
			continue
		}
		_, err := fmt.Sscanf(s.Text(), "fleet %d %d %d %d %d %d %d %d",
			&r.syncs, &r.others, &r.leases, &r.probes, &r.holds, &r.recoveries, &r.heldFleet, &r.heldRamp)
		if err != nil {
			return fmt.Errorf("said %q", s.Text())
		}
		found = true
	}
	if !found {
		return errors.New("no line of counts")
	}
	return s.Err()
}

// fleetChild is one process of TestFleetBackendOutage: a replica whose
// workers Get a connection, send it a byte and read one back, Put it if
// that worked and Discard it if not, from the run's start to its end.
func fleetChild() int {
	addr, backendAddr, name := os.Getenv("MOONREDIS_ADDR"), os.Getenv("MOONREDIS_BACKEND"), os.Getenv("MOONREDIS_PREFIX")
	seed, _ := strconv.Atoi(os.Getenv("MOONREDIS_SEED"))
	redis.SetLogger(quiet{})
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	steps := &stepCount{n: map[string]int{}}
	rdb.AddHook(steps.hook())
	eng := client.NewEngine()
	fl, err := NewFleet(eng, FleetConfig{Client: rdb, Name: name, Replica: fmt.Sprint("p", seed), ProbeEvery: fleetEvery, Heartbeat: fleetBeat})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	limits := client.Limits{Size: fleetSize, Idle: fleetSize}
	pool, err := client.NewPool(eng, client.PoolConfig[net.Conn]{
		Open: func(ctx context.Context) (net.Conn, error) {
			d := net.Dialer{Timeout: 200 * time.Millisecond}
			c, err := d.DialContext(ctx, "tcp", backendAddr)
			if err != nil {
				return nil, err
			}
			c.SetDeadline(time.Now().Add(200 * time.Millisecond))
			if _, err := c.Read(make([]byte, 1)); err != nil { // the greeting
				c.Close()
				return nil, err
			}
			return c, nil
		},
		Close:  func(c net.Conn) error { return c.Close() },
		Limits: limits,
		Ward: client.Ward{ // examples/pgpool's
			Bucket:  client.Rate{PerSecond: 2 * float64(limits.Size), Burst: float64(limits.Size)},
			Backoff: client.DefaultBackoff,
			Breaker: client.DefaultBreaker,
		},
		Fleet: fl,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Ready: the parent answers with the run's start.
	readyPipe := os.NewFile(3, "ready")
	fmt.Fprintln(readyPipe, "ready")
	readyPipe.Close()
	var ns int64
	if _, err := fmt.Fscan(os.Stdin, &ns); err != nil {
		fmt.Fprintln(os.Stderr, "no start:", err)
		return 1
	}
	start := time.Unix(0, ns)
	time.Sleep(time.Until(start))
	var mu sync.Mutex
	var oks []int64 // when each use that worked ended, from shortly before the kill on (Unix ns)
	var healthy map[string]int
	var wg sync.WaitGroup
	// The calls to Redis while the backend is healthy: from the start to
	// a moment before the kill, so a read that wakes late does not count
	// what the kill sets off.
	wg.Go(func() {
		before := steps.read()
		time.Sleep(time.Until(start.Add(fleetKill - fleetSettle)))
		healthy = steps.read()
		for k, v := range before {
			healthy[k] -= v
		}
	})
	for range fleetWorkers {
		wg.Go(func() {
			buf := []byte{'?'}
			for time.Since(start) < fleetEnd {
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				c, err := pool.Get(ctx)
				cancel()
				if err != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				c.SetDeadline(time.Now().Add(200 * time.Millisecond))
				_, err = c.Write(buf)
				if err == nil {
					_, err = c.Read(buf)
				}
				if err != nil {
					pool.Discard(c)
					continue
				}
				pool.Put(c)
				if time.Since(start) > fleetKill-fleetSettle {
					mu.Lock()
					oks = append(oks, time.Now().UnixNano())
					mu.Unlock()
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	ps, st := pool.Stats(), fl.Stats()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := eng.Shutdown(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	others := 0
	for k, v := range healthy {
		if k != stepSync {
			others += v
		}
	}
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(w, "fleet %d %d %d %d %d %d %d %d\n", healthy[stepSync], others,
		st.Leases, st.Probes, st.Holds, st.Recoveries, ps.HeldFleet, ps.HeldRamp)
	for _, at := range oks {
		fmt.Fprintf(w, "ok %d\n", at)
	}
	w.Flush()
	return 0
}

// TestFleetRedisKilled: two replicas on a real redis-server hold their
// fleet; the server is killed, and both are alone within moments (their
// pools follow their local wards); it restarts empty (it saves nothing),
// and both take what it says then: no hold.
func TestFleetRedisKilled(t *testing.T) {
	srv := redistest.New(t)
	eng := realEngine(t)
	rdb := realClient(t, srv.Addr())
	pools := make([]*poolSide, 2)
	fleets := make([]*Fleet, 2)
	name := fmt.Sprint("killed-", time.Now().UnixNano())
	for i := range fleets {
		fl, err := NewFleet(eng, FleetConfig{Client: rdb, Name: name, Replica: fmt.Sprint("r", i), Heartbeat: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		fleets[i], pools[i] = fl, &poolSide{}
		pools[i].report, pools[i].leave = fl.Join(pools[i].set)
	}
	every := func(what string, ok func(client.FleetView) bool) {
		t.Helper()
		waitFor(t, what, func() bool { return ok(pools[0].last()) && ok(pools[1].last()) })
	}
	waitFor(t, "both members", func() bool { return fleets[0].Stats().Members == 2 && fleets[1].Stats().Members == 2 })
	pools[0].report(client.FleetReport{Failures: 1})
	pools[1].report(client.FleetReport{Failures: 1})
	every("both held", func(v client.FleetView) bool { return v.State == client.FleetHeld })
	srv.Kill()
	killed := time.Now()
	every("both alone", func(v client.FleetView) bool { return v.State == client.FleetAlone })
	t.Logf("both alone %v after the kill", time.Since(killed).Round(time.Millisecond))
	from := []int{pools[0].seen(), pools[1].seen()}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	every("both back", func(v client.FleetView) bool { return v.State != client.FleetAlone })
	t.Logf("both back %v after the restart", time.Since(back).Round(time.Millisecond))
	for i, p := range pools {
		for _, s := range p.states(from[i]) {
			if s != client.FleetOpen {
				t.Errorf("replica %d was handed %v after Redis restarted empty, want open", i, s)
			}
		}
	}
}
