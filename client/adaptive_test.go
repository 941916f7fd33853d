package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
)

// adaptiveEngine is an engine on a virtual clock, shut down with the test.
func adaptiveEngine(t *testing.T) (*engine.Engine, *vclock.Virtual) {
	t.Helper()
	clock := vclock.NewVirtual()
	eng := engine.New(engine.WithClock(clock))
	t.Cleanup(func() {
		if err := eng.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return eng, clock
}

// TestAdaptiveGateHoldsItsStart: with the limit at its start, exactly that
// many get in at once; TryEnter refuses the next, and a Leave makes room.
func TestAdaptiveGateHoldsItsStart(t *testing.T) {
	eng, _ := adaptiveEngine(t)
	g, err := client.NewAdaptiveGate(eng, client.AdaptiveConfig{Start: 5, Queue: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var passes []client.Pass
	for i := range 5 {
		p, err := g.Enter(ctx)
		if err != nil {
			t.Fatalf("enter %d: %v", i, err)
		}
		passes = append(passes, p)
	}
	if _, ok := g.TryEnter(ctx); ok {
		t.Fatal("TryEnter let a sixth in past a limit of 5")
	}
	if _, err := g.Enter(ctx); !errors.Is(err, client.ErrShed) {
		t.Fatalf("Enter with no room and no line: %v, want ErrShed", err)
	}
	if s := g.Stats(); s.Limit != 5 || s.InFlight != 5 || s.Classes[1].Entered != 5 {
		t.Fatalf("stats %+v, want limit 5, 5 in flight, 5 entered as normal", s)
	}
	passes[0].Leave()
	passes[0].Leave() // a second Leave does nothing
	p, ok := g.TryEnter(ctx)
	if !ok {
		t.Fatal("no room after a Leave")
	}
	if _, ok := g.TryEnter(ctx); ok {
		t.Fatal("a second Leave of one Pass made room")
	}
	p.Drop()
	for i := 1; i < len(passes); i++ {
		passes[i].Leave()
	}
	if s := g.Stats(); s.InFlight != 0 {
		t.Fatalf("InFlight %d after every pass came back", s.InFlight)
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Enter(ctx); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Enter after Close: %v, want ErrClosed", err)
	}
	_ = time.Second
}
