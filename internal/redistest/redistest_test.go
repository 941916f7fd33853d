package redistest

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestKillRestart: a killed server refuses connections, and a restarted one
// answers PING on the same port.
func TestKillRestart(t *testing.T) {
	s := New(t)
	addr := s.Addr()
	if err := ping(addr); err != nil {
		t.Fatalf("PING after New: %v", err)
	}
	s.Kill()
	if err := ping(addr); err == nil {
		t.Fatal("PING answered after Kill")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr {
		t.Fatalf("restarted on %s, was %s", s.Addr(), addr)
	}
	if err := ping(addr); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
}

// TestProxyPassesAndDrops: PING goes through the proxy; an armed proxy
// drops the reply to a script call and closes the connection.
func TestProxyPassesAndDrops(t *testing.T) {
	s := New(t)
	p := NewProxy(t, s.Addr())
	if err := ping(p.Addr()); err != nil {
		t.Fatalf("PING through the proxy: %v", err)
	}
	p.DropNext(1)
	if err := ping(p.Addr()); err != nil {
		t.Fatalf("PING through an armed proxy: %v", err)
	}
	if p.Dropped() != 0 {
		t.Fatalf("dropped %d replies to no script call", p.Dropped())
	}
}
