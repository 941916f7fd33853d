package redistest

import (
	"context"
	"net"
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

// TestSilent: a client connects to a Silent and hears nothing back.
func TestSilent(t *testing.T) {
	s := NewSilent(t)
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := c.Read(make([]byte, 16)); n != 0 || err == nil {
		t.Errorf("Read = %d, %v: want nothing until the deadline", n, err)
	}
}
