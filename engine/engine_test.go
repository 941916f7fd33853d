package engine

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/moonpool-go/moonpool/internal/vclock"
)

// counter counts *ping messages and answers them; *boom panics.
type counter struct{ n *atomic.Int64 }

type boom struct{}

func (c counter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *ping:
		c.n.Add(1)
		m.reply <- struct{}{}
	case *boom:
		panic("boom")
	}
}

func TestSpawnLookupStop(t *testing.T) {
	for _, d := range []scheduling{hybrid, dedicated, stock, synchronized} {
		t.Run(d.String(), func(t *testing.T) {
			e := New(withDispatch(d, 2))
			defer e.Shutdown(context.Background())
			var n atomic.Int64
			ref, err := e.Spawn("a", counter{&n}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.Spawn("a", counter{&n}, nil); !errors.Is(err, ErrNameTaken) {
				t.Fatalf("second spawn under one name: %v", err)
			}
			got, ok := e.Lookup("a")
			if !ok || got != ref {
				t.Fatalf("lookup: %v %v", got, ok)
			}
			p := &ping{reply: make(chan struct{}, 1)}
			for range 100 {
				ref.Send(p)
				<-p.reply
			}
			if n.Load() != 100 {
				t.Fatalf("ran %d messages, want 100", n.Load())
			}
			if err := e.Stop(context.Background(), "a"); err != nil {
				t.Fatal(err)
			}
			if !ref.Stopped() {
				t.Fatal("not stopped after Stop")
			}
			// A request to a stopped actor is refused, not lost.
			ref.Send(p)
			<-p.reply
			if n.Load() != 100 {
				t.Fatal("a stopped actor ran a message")
			}
			if _, ok := e.Lookup("a"); ok {
				t.Fatal("a stopped actor is still found by name")
			}
			if err := e.Stop(context.Background(), "a"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("stop twice: %v", err)
			}
		})
	}
}

func TestPanicResumesSameActor(t *testing.T) {
	var buf bytes.Buffer
	e := New(WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	defer e.Shutdown(context.Background())
	var n atomic.Int64
	ref, _ := e.Spawn("", counter{&n}, nil)
	p := &ping{reply: make(chan struct{}, 1)}
	ref.Send(p)
	<-p.reply
	ref.Send(&boom{})
	ref.Send(p)
	<-p.reply
	if n.Load() != 2 {
		t.Fatalf("after a panic the actor ran %d pings, want 2", n.Load())
	}
	if !bytes.Contains(buf.Bytes(), []byte("boom")) {
		t.Error("the panic was not logged to the logger given")
	}
}

func TestQuietByDefault(t *testing.T) {
	// protoactor logs an INFO line at start; New must route it to the
	// discard logger, never to stderr. The logger the engine holds is the
	// one the system logs to.
	e := New()
	defer e.Shutdown(context.Background())
	if e.Logger().Enabled(context.Background(), slog.LevelError) {
		t.Fatal("the default logger would print")
	}
	if e.system.Logger() != e.Logger() {
		t.Fatal("protoactor logs somewhere other than the engine's logger")
	}
}

func TestShutdownRunsHooksWithinCtx(t *testing.T) {
	e := New()
	release := make(chan struct{})
	var ran atomic.Int64
	for _, name := range []string{"quick", "slow"} {
		_, err := e.Spawn(name, counter{new(atomic.Int64)}, func(ctx context.Context) error {
			ran.Add(1)
			if name == "quick" {
				return nil
			}
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("shutdown with a hook still waiting: %v", err)
	}
	if ran.Load() != 2 {
		t.Fatalf("ran %d hooks, want 2", ran.Load())
	}
	if _, err := e.Spawn("late", counter{new(atomic.Int64)}, nil); !errors.Is(err, ErrShutdown) {
		t.Fatalf("spawn after shutdown: %v", err)
	}
	// A second Shutdown returns the first's result.
	if err := e.Shutdown(context.Background()); !errors.Is(err, context.Canceled) {
		t.Fatalf("second shutdown: %v, want the first's context.Canceled", err)
	}
	close(release)
}

func TestHeatWatchOnEngineClock(t *testing.T) {
	clock := vclock.NewVirtual()
	e := New(WithClock(clock), WithHeatEvery(time.Second))
	defer e.Shutdown(context.Background())
	readings := make(chan int64, 8)
	cancel := e.WatchHeat(func(now int64, heat float64) {
		if heat < 0 {
			t.Errorf("negative heat %v", heat)
		}
		readings <- now
	})
	start := clock.Now()
	for i := 1; i <= 3; i++ {
		if err := clock.WaitPending(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		if at := <-readings; at != start+int64(i)*int64(time.Second) {
			t.Fatalf("reading %d at +%v, want +%ds", i, time.Duration(at-start), i)
		}
	}
	cancel()
	// After cancel the timer may fire once more but nobody is told, and it
	// is not re-armed.
	if err := clock.WaitPending(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	e.Lookup("sync") // a round trip through the directory: the tick is handled
	if n := clock.Pending(); n != 0 {
		t.Fatalf("%d timers pending after the last watcher left", n)
	}
	select {
	case at := <-readings:
		t.Fatalf("a reading at +%v after cancel", time.Duration(at-start))
	default:
	}
}

func TestHeatOf(t *testing.T) {
	buckets := []float64{0, 0.001, 0.005, 0.010, 0.1}
	last := []uint64{0, 0, 0, 0}
	tests := []struct {
		name   string
		counts []uint64
		want   float64
	}{
		{"nothing scheduled", []uint64{0, 0, 0, 0}, 0},
		{"all under a millisecond", []uint64{1000, 0, 0, 0}, 0},
		{"p99 in 1-5 ms", []uint64{980, 20, 0, 0}, 0.2},
		{"p99 at 5-10 ms: hot", []uint64{900, 50, 50, 0}, 1},
		{"p99 past 10 ms", []uint64{0, 0, 0, 100}, 2},
	}
	for _, tc := range tests {
		got := heatOf(tc.counts, last, buckets, false)
		if diff := got - tc.want; diff > 1e-9 || diff < -1e-9 {
			t.Errorf("%s: heat %v, want %v", tc.name, got, tc.want)
		}
	}
	// Readings are of the difference since the last one.
	prev := []uint64{0, 0, 0, 100}
	if got := heatOf([]uint64{1000, 0, 0, 100}, prev, buckets, true); got != 0 {
		t.Errorf("old latencies counted again: %v", got)
	}
	if prev[0] != 1000 {
		t.Error("advance did not move the baseline")
	}
}

func TestHeatMeterReadsRuntime(t *testing.T) {
	m := newHeatMeter()
	for range 3 {
		if h := m.read(); h < 0 || h != h {
			t.Fatalf("heat %v", h)
		}
	}
}

// TestSpawnRacingShutdown: Spawn on many goroutines while Shutdown runs
// never crashes, each Spawn either succeeds or answers ErrShutdown, every
// actor a Spawn handed out is stopped when Shutdown returns, and no Spawn
// succeeds once Shutdown has begun: Shutdown never picks up a Ref whose
// PID is not set yet.
func TestSpawnRacingShutdown(t *testing.T) {
	for round := range 20 {
		e := New()
		const spawners = 8
		var spawned atomic.Int64
		type result struct {
			refs []*Ref
			err  error // the error that ended the loop
			late bool  // a Spawn that started after Shutdown began succeeded
		}
		results := make(chan result, spawners)
		for range spawners {
			go func() {
				var r result
				for {
					after := e.down.Load() // Shutdown has begun
					ref, err := e.Spawn("", counter{new(atomic.Int64)}, func(context.Context) error { return nil })
					if err != nil {
						r.err = err
						break
					}
					r.late = r.late || after
					r.refs = append(r.refs, ref)
					spawned.Add(1)
				}
				results <- r
			}()
		}
		err := waitFor("16 actors spawned", func() bool { return spawned.Load() >= 16 })
		if err != nil {
			e.Shutdown(context.Background()) // the spawners stop
			t.Fatalf("round %d: %v", round, err)
		}
		if err := e.Shutdown(context.Background()); err != nil {
			t.Fatalf("round %d: shutdown: %v", round, err)
		}
		for range spawners {
			r := <-results
			if !errors.Is(r.err, ErrShutdown) {
				t.Fatalf("round %d: a spawner stopped on %v, want ErrShutdown", round, r.err)
			}
			if r.late {
				t.Fatalf("round %d: a Spawn begun after Shutdown succeeded", round)
			}
			for _, ref := range r.refs {
				if !ref.Stopped() {
					t.Fatalf("round %d: actor %s outlived Shutdown", round, ref.Name())
				}
			}
		}
	}
}

// blocker is an actor whose shutdown hook blocks until its ctx ends,
// announcing on started that it has begun.
func blocker(t *testing.T, e *Engine, name string) (*Ref, chan struct{}) {
	t.Helper()
	started := make(chan struct{}, 1)
	ref, err := e.Spawn(name, counter{new(atomic.Int64)}, func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		return context.Cause(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	return ref, started
}

// TestShutdownBoundsAWaitingClose: while a Stop with no deadline is still
// in its actor's shutdown hook, a Shutdown whose ctx ends stops the actor
// anyway, and the first Stop's hook sees its ctx end because the actor is
// gone, so it returns too.
func TestShutdownBoundsAWaitingClose(t *testing.T) {
	e := New()
	ref, started := blocker(t, e, "draining")
	first := make(chan error, 1)
	go func() { first <- e.Stop(context.Background(), "draining") }()
	<-started

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("step 1: Shutdown with its ctx ended = %v, want context.Canceled", err)
	}
	if !ref.Stopped() {
		t.Fatal("step 2: the actor is still running after Shutdown returned")
	}
	// A first Stop that never returns hangs here, and go test's -timeout
	// reports it with every goroutine's stack.
	if err := <-first; !errors.Is(err, ErrStopped) {
		t.Fatalf("step 3: the first Stop = %v, want ErrStopped (its actor was stopped under it)", err)
	}
}

// TestStopBoundsAWaitingClose: the same for a second Stop, whose doc says
// the actor is stopped anyway when its ctx ends.
func TestStopBoundsAWaitingClose(t *testing.T) {
	e := New()
	defer e.Shutdown(context.Background())
	ref, started := blocker(t, e, "draining")
	first := make(chan error, 1)
	go func() { first <- ref.Stop(context.Background()) }()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Stop(ctx, "draining"); !errors.Is(err, context.Canceled) {
		t.Fatalf("second Stop with its ctx ended = %v, want context.Canceled", err)
	}
	if !ref.Stopped() {
		t.Fatal("the actor is still running after the second Stop returned")
	}
	if err := <-first; !errors.Is(err, ErrStopped) {
		t.Fatalf("the first Stop = %v, want ErrStopped", err)
	}
}

// TestSecondShutdownWaits: a second Shutdown waits for the first to end,
// within its own ctx, and then returns the first's result, not nil at
// once while the first still waits.
func TestSecondShutdownWaits(t *testing.T) {
	e := New()
	release := make(chan struct{})
	started := make(chan struct{})
	failed := errors.New("the hook failed")
	ref, err := e.Spawn("slow", counter{new(atomic.Int64)}, func(context.Context) error {
		close(started)
		<-release
		return failed
	})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- e.Shutdown(context.Background()) }()
	<-started

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("step 1: a second Shutdown whose ctx ended while the first runs = %v, want context.Canceled", err)
	}
	third := make(chan error, 1)
	go func() { third <- e.Shutdown(context.Background()) }()
	close(release)
	if err := <-third; !errors.Is(err, failed) {
		t.Fatalf("step 2: a second Shutdown = %v, want the first's result", err)
	}
	if !ref.Stopped() {
		t.Fatal("step 3: a second Shutdown returned before the actors had stopped")
	}
	if err := <-first; !errors.Is(err, failed) {
		t.Fatalf("step 4: the first Shutdown = %v", err)
	}
	if err := e.Shutdown(context.Background()); !errors.Is(err, failed) {
		t.Fatalf("step 5: a Shutdown after the end = %v, want the first's result", err)
	}
}

// TestFreshNamesNeverCollide: a user may name an actor like the fresh
// names of an earlier version, and the fresh names go on working; names
// with the engine's prefix are refused.
func TestFreshNamesNeverCollide(t *testing.T) {
	e := New()
	defer e.Shutdown(context.Background())
	for _, name := range []string{"actor-1", "actor-2", "actor-3"} {
		if _, err := e.Spawn(name, counter{new(atomic.Int64)}, nil); err != nil {
			t.Fatalf("user name %q: %v", name, err)
		}
	}
	seen := map[string]bool{}
	for i := range 5 {
		ref, err := e.Spawn("", counter{new(atomic.Int64)}, nil)
		if err != nil {
			t.Fatalf("unnamed spawn %d: %v", i, err)
		}
		if seen[ref.Name()] || !strings.HasPrefix(ref.Name(), ReservedPrefix) {
			t.Fatalf("unnamed spawn %d got %q", i, ref.Name())
		}
		seen[ref.Name()] = true
		if _, err := e.Spawn(ref.Name(), counter{new(atomic.Int64)}, nil); !errors.Is(err, ErrReservedName) {
			t.Fatalf("a user taking the fresh name %q: %v, want ErrReservedName", ref.Name(), err)
		}
	}
	if _, err := e.Spawn(ReservedPrefix+"mine", counter{new(atomic.Int64)}, nil); !errors.Is(err, ErrReservedName) {
		t.Fatalf("a user name with the reserved prefix: %v, want ErrReservedName", err)
	}
}

// TestRefStopActsOnItsOwnActor: stopping a Ref twice after its name went
// to a new actor leaves the new one alone, where a Stop by name would
// stop the newcomer.
func TestRefStopActsOnItsOwnActor(t *testing.T) {
	e := New()
	defer e.Shutdown(context.Background())
	old, err := e.Spawn("db", counter{new(atomic.Int64)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	fresh, err := e.Spawn("db", counter{new(atomic.Int64)}, nil)
	if err != nil {
		t.Fatalf("the name of a stopped actor: %v", err)
	}
	if err := old.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop of the old Ref = %v", err)
	}
	if fresh.Stopped() {
		t.Fatal("stopping the old Ref stopped the actor that took its name")
	}
	if got, ok := e.Lookup("db"); !ok || got != fresh {
		t.Fatalf("the name now finds %v %v, want the new actor", got, ok)
	}
}
