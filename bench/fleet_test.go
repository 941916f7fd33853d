package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/internal/redistest"
	"github.com/sony/gobreaker/v2"
)

// TestBackendDiesAndReturns checks the outage's backend: alive it greets
// and echoes, dead it closes what it served and fails every dial at the
// greeting, and back it serves again. Every connection is counted where it
// arrives.
func TestBackendDiesAndReturns(t *testing.T) {
	be, err := startBackend()
	if err != nil {
		t.Fatal(err)
	}
	defer be.close()
	d := dialer{addr: be.addr()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := d.open(ctx)
	if err != nil {
		t.Fatalf("dial of a live backend: %v", err)
	}
	defer c.Close()
	if err := d.roundTrip(ctx, c); err != nil {
		t.Fatalf("round trip on a live backend: %v", err)
	}
	be.kill()
	if err := d.roundTrip(ctx, c); err == nil {
		t.Error("a round trip on a connection served before the backend died worked")
	}
	if c, err := d.open(ctx); err == nil {
		c.Close()
		t.Error("a dial of a dead backend worked")
	}
	be.revive()
	c2, err := d.open(ctx)
	if err != nil {
		t.Fatalf("dial of the backend back: %v", err)
	}
	defer c2.Close()
	if err := d.roundTrip(ctx, c2); err != nil {
		t.Errorf("round trip on the backend back: %v", err)
	}
	if n := be.arrivedIn(0, mono()+1); n != 3 {
		t.Errorf("the backend counted %d arrivals, want 3", n)
	}
}

// TestBrokenDialerFailsAtOnce checks a replica's local fault: its dials
// and its round trips fail without reaching the backend.
func TestBrokenDialerFailsAtOnce(t *testing.T) {
	be, err := startBackend()
	if err != nil {
		t.Fatal(err)
	}
	defer be.close()
	var broken atomic.Bool
	d := dialer{addr: be.addr(), broken: &broken}
	c, err := d.open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	broken.Store(true)
	if _, err := d.open(t.Context()); !errors.Is(err, errLocalFault) {
		t.Errorf("dial with the local network down: %v, want errLocalFault", err)
	}
	if err := d.roundTrip(t.Context(), c); !errors.Is(err, errLocalFault) {
		t.Errorf("round trip with the local network down: %v, want errLocalFault", err)
	}
	if n := be.arrivedIn(0, mono()+1); n != 1 {
		t.Errorf("the backend counted %d arrivals, want the one dial made before the fault", n)
	}
}

// TestRedisStore checks gobreaker's SharedDataStore over go-redis: the lock
// shuts out a second holder until the first frees it, only its holder
// frees it, and two distributed breakers over it share one state.
func TestRedisStore(t *testing.T) {
	srv := redistest.New(t)
	var cmds atomic.Int64
	rdb := commandsTo(srv.Addr(), &cmds)
	defer rdb.Close()
	a, b := newRedisStore(rdb, "a"), newRedisStore(rdb, "b")

	if data, err := a.GetData("state"); data != nil || err != nil {
		t.Errorf("GetData of no state = %q, %v; want nil, nil", data, err)
	}
	if err := a.SetData("state", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if data, err := b.GetData("state"); string(data) != "x" || err != nil {
		t.Errorf("GetData = %q, %v; want x", data, err)
	}

	if err := a.Lock("mutex"); err != nil {
		t.Fatal(err)
	}
	if err := b.Unlock("mutex"); err == nil {
		t.Error("a store freed a lock it does not hold")
	}
	got := make(chan error, 1)
	go func() { got <- b.Lock("mutex") }()
	select {
	case err := <-got:
		t.Fatalf("a second store took a held lock: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := a.Unlock("mutex"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the second store's Lock, once freed: %v", err)
		}
	case <-time.After(lockWait):
		t.Fatal("the second store did not take the lock within lockWait of its release")
	}
	if err := b.Unlock("mutex"); err != nil {
		t.Error(err)
	}

	// Two replicas' breakers, one state: six failures through one open
	// the other.
	one, err := gobreaker.NewDistributedCircuitBreaker[struct{}](a, gobreakerSettings("shared"))
	if err != nil {
		t.Fatal(err)
	}
	two, err := gobreaker.NewDistributedCircuitBreaker[struct{}](b, gobreakerSettings("shared"))
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		one.Execute(func() (struct{}, error) { return struct{}{}, errDown })
	}
	if _, err := two.Execute(func() (struct{}, error) { return struct{}{}, nil }); !errors.Is(err, gobreaker.ErrOpenState) {
		t.Errorf("the other replica's breaker answered %v, want ErrOpenState", err)
	}
	if cmds.Load() == 0 {
		t.Error("counted no Redis command")
	}
}

// TestFleetSidesRecover runs two replicas of every side through a short
// outage: each works on a healthy backend, fails while it is dead, and
// works again within a few seconds of its return.
func TestFleetSidesRecover(t *testing.T) {
	srv := redistest.New(t)
	be, err := startBackend()
	if err != nil {
		t.Fatal(err)
	}
	defer be.close()
	var cmds atomic.Int64
	env := fleetEnv{backend: be.addr(), redis: srv.Addr(), name: "recover", cmds: &cmds}
	for _, s := range fleetSides() {
		env.name = "recover-" + s.name
		reps, err := buildReplicas(s, env, 2, nil)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		do := func(r replica) error {
			ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
			defer cancel()
			return r.do(ctx)
		}
		for i, r := range reps {
			if err := do(r); err != nil {
				t.Errorf("%s replica %d, healthy backend: %v", s.name, i, err)
			}
		}
		be.kill()
		for i, r := range reps {
			if err := do(r); err == nil {
				t.Errorf("%s replica %d: a request worked on a dead backend", s.name, i)
			}
		}
		be.revive()
		for i, r := range reps {
			give := time.Now().Add(5 * time.Second)
			for do(r) != nil {
				if time.Now().After(give) {
					t.Errorf("%s replica %d: no request worked within 5s of the backend's return", s.name, i)
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		closeReplicas(reps)
	}
}

// TestFleetSuite runs the suite in its smallest configuration and checks
// what it reports: every side at every fleet size, the targets of the
// fleet ward, and the plot beside results.md. It asserts no time.
func TestFleetSuite(t *testing.T) {
	redistest.Require(t)
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run(configs["smoke"], "Fleet", dir, &stdout, &stderr, false); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	table := stdout.String()
	want := []string{"FLEET", "Fleet outage: backend dead", "dials/s while dead", "back → first success: p50",
		"Redis cmd/Get", "others' success before", "TARGETS: fleet ward", "at most a fifth of the local ward's",
		"does not hold the other N−1", "what the fleet ward's ramp allows"}
	for _, s := range fleetSides() {
		want = append(want, s.name)
	}
	for _, want := range want {
		if !strings.Contains(table, want) {
			t.Errorf("the table has no %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "not measured") {
		t.Errorf("a target went unmeasured:\n%s", table)
	}
	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Targets: fleet ward", "## Fleet", "| replicas | side |", "fleet-outage-new-connections.svg"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md has no %q:\n%s", want, md)
		}
	}
	f, err := os.Open(filepath.Join(dir, "fleet-outage-new-connections.svg"))
	if err != nil {
		t.Fatalf("no plot: %v", err)
	}
	defer f.Close()
	if err := wellFormed(f); err != nil {
		t.Errorf("the plot is not well-formed XML: %v", err)
	}
	svg, _ := os.ReadFile(f.Name())
	for _, s := range fleetSides() {
		if n := strings.Count(string(svg), ">"+s.name+"<"); n != 1 {
			t.Errorf("the plot names %q %d times, want once, in its legend", s.name, n)
		}
	}
}

// TestFleetWithoutServer checks that -only Fleet on a machine with no
// redis-server says so in one line, with how to get it, and fails nothing.
func TestFleetWithoutServer(t *testing.T) {
	old := startRedis
	t.Cleanup(func() { startRedis = old })
	startRedis = func(context.Context, string) (*redistest.Server, error) { return nil, redistest.ErrNoServer }
	var stdout, stderr bytes.Buffer
	if err := run(configs["smoke"], "Fleet", "", &stdout, &stderr, false); err != nil {
		t.Fatalf("run: %v", err)
	}
	var said []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, "Fleet skipped") {
			said = append(said, l)
		}
	}
	if len(said) != 1 || !strings.Contains(said[0], "apt-get install redis-server") {
		t.Errorf("want one line saying Fleet was skipped and how to get it; stderr:\n%s", stderr.String())
	}
}

// TestPairedRatios checks the healthy row's target reads each round's
// ratio: a side slower in one round only is not slower overall, and the
// worst level decides.
func TestPairedRatios(t *testing.T) {
	r := &result{levels: []level{
		{callers: 1, sides: []measured{
			{side: sideFleet, rounds: []float64{100, 200, 100}},
			{side: sideLocal, rounds: []float64{100, 100, 100}},
		}},
		{callers: 8, sides: []measured{
			{side: sideFleet, rounds: []float64{110, 220, 330}},
			{side: sideLocal, rounds: []float64{100, 200, 300}},
		}},
	}}
	text, worst, ok := pairedRatios(r, sideFleet, sideLocal)
	if !ok || worst != 1.1 || text != "1: 1.00×, 8: 1.10×" {
		t.Errorf("pairedRatios = %q, %v, %v; want \"1: 1.00×, 8: 1.10×\", 1.1, true", text, worst, ok)
	}
	if _, _, ok := pairedRatios(r, sideFleet, sideGobDist); ok {
		t.Error("pairedRatios reported a side the row does not have")
	}
}
