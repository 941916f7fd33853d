package engine

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
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
	for _, d := range []Dispatch{Hybrid, Dedicated, Spawn, Synchronized} {
		t.Run(d.String(), func(t *testing.T) {
			e := New(WithDispatch(d, 2))
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
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatalf("second shutdown: %v", err)
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
