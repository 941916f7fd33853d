package client

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/policy"
)

// idleServer is a real TCP server on 127.0.0.1 that answers "ping" with
// "pong" and drops idle connections as a server with an idle timeout does.
// The pools under test run on a virtual clock, so the server's idle timeout
// is the test's signal rather than real time: reap closes every connection
// that had no traffic since the reap before.
type idleServer struct {
	t    testing.TB
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	seen map[net.Conn]bool // open connections → traffic since the last reap
}

func newIdleServer(t testing.TB) *idleServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &idleServer{t: t, ln: ln, seen: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *idleServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.seen[c] = false
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *idleServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			s.mu.Lock()
			delete(s.seen, c)
			s.mu.Unlock()
			return
		}
		if line == "ping\n" {
			s.mu.Lock()
			s.seen[c] = true // before the answer: a client that read pong was seen
			s.mu.Unlock()
			c.Write([]byte("pong\n"))
		}
	}
}

// open is how many connections the server holds open: a dial returns
// before the server has accepted, so a test waits for this.
func (s *idleServer) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// reap closes every connection idle since the last reap, and says how many.
func (s *idleServer) reap() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c, busy := range s.seen {
		if !busy {
			c.Close()
			delete(s.seen, c)
			n++
		} else {
			s.seen[c] = false
		}
	}
	return n
}

func (s *idleServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.seen {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// tconn is a pooled client connection to an idleServer.
type tconn struct {
	c net.Conn
	r *bufio.Reader
}

// ping asks the server for a pong: the check, and what a caller does with
// a connection. The deadline is real time, a net for a hung test only: the
// server is local and answers at once, or the connection is closed.
func (c *tconn) ping(ctx context.Context) error {
	c.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "pong\n" {
		return errors.New("no pong: " + line)
	}
	return ctx.Err()
}

// tcpRig is a pool of connections to an idleServer on a virtual clock;
// opened and closed count the connections.
type tcpRig struct {
	t              *testing.T
	ctx            context.Context // the safety net
	clock          *vclock.Virtual
	pool           *Pool[*tconn]
	opened, closed atomic.Int64
}

func newTCPRig(t *testing.T, srv *idleServer, cfg PoolConfig[*tconn]) *tcpRig {
	r := &tcpRig{t: t, clock: vclock.NewVirtual()}
	ctx, cancel := context.WithTimeout(context.Background(), safety)
	t.Cleanup(cancel)
	r.ctx = ctx
	cfg.Open = func(ctx context.Context) (*tconn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", srv.ln.Addr().String())
		if err != nil {
			return nil, err
		}
		r.opened.Add(1)
		return &tconn{c: c, r: bufio.NewReader(c)}, nil
	}
	cfg.Close = func(c *tconn) error { r.closed.Add(1); return c.c.Close() }
	cfg.Check = func(ctx context.Context, c *tconn) error { return c.ping(ctx) }
	eng := engine.New(engine.WithClock(r.clock), engine.WithHeatEvery(0))
	p, err := NewPool(eng, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.pool = p
	t.Cleanup(func() {
		if err := p.Close(ctx); err != nil {
			t.Errorf("pool close: %v", err)
		}
		if err := eng.Shutdown(ctx); err != nil {
			t.Errorf("engine shutdown: %v", err)
		}
		if o, c := r.opened.Load(), r.closed.Load(); o != c {
			t.Errorf("opened %d connections, closed %d", o, c)
		}
	})
	return r
}

func (r *tcpRig) waitFor(what string, ok func() bool) {
	r.t.Helper()
	spinUntil(r.t, r.ctx, what, ok)
}

// TestCheckNeverLendsDead: the server drops every connection idle for a
// while (a "second" of the test's); with Check and CheckIdle no Get ever
// returns a dead connection: each one that sat is pinged first, and a dead
// one is closed and the next tried, the caller seeing no error.
func TestCheckNeverLendsDead(t *testing.T) {
	srv := newIdleServer(t)
	r := newTCPRig(t, srv, PoolConfig[*tconn]{
		Limits:    policy.Limits{Size: 4},
		CheckIdle: time.Second,
	})
	reaped := 0
	for round := range 24 {
		var held []*tconn
		for range 1 + round%4 { // some rounds leave connections unused, to die
			c, err := r.pool.Get(r.ctx)
			if err != nil {
				t.Fatalf("round %d: get: %v", round, err)
			}
			if err := c.ping(r.ctx); err != nil {
				t.Fatalf("round %d: Get lent a dead connection: %v", round, err)
			}
			held = append(held, c)
		}
		for _, c := range held {
			if err := r.pool.Put(c); err != nil {
				t.Fatalf("round %d: put: %v", round, err)
			}
		}
		r.clock.Advance(1500 * time.Millisecond) // idle past CheckIdle...
		reaped += srv.reap()                     // ...and past the server's timeout
	}
	s := r.pool.Stats()
	if reaped == 0 || s.CheckFailures == 0 || s.CheckFailures > int64(reaped) {
		t.Errorf("the server dropped %d, checks failed on %d; want some, no more than dropped", reaped, s.CheckFailures)
	}
}

// TestKeepAliveReplacesDead: with KeepAlive, the idle connections the
// server dropped are found by the background checks and, with MinIdle,
// replaced before anyone asks: the next Get, which does not check (CheckIdle
// is an hour), gets a live one.
func TestKeepAliveReplacesDead(t *testing.T) {
	srv := newIdleServer(t)
	r := newTCPRig(t, srv, PoolConfig[*tconn]{
		Limits:    policy.Limits{Size: 3, MinIdle: 3},
		CheckIdle: time.Hour,
		KeepAlive: time.Second,
	})
	r.waitFor("the warm-up", func() bool {
		return r.pool.Stats().Idle == 3 && r.clock.Pending() > 0 && srv.open() == 3
	})
	if n := srv.reap(); n != 3 {
		t.Fatalf("the server dropped %d, want the 3 idle", n)
	}
	r.clock.Advance(time.Second) // the keep-alive's period
	r.waitFor("the dead found and replaced", func() bool {
		s := r.pool.Stats()
		return s.CheckFailures == 3 && s.Idle == 3
	})
	for range 3 {
		c, err := r.pool.Get(r.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ping(r.ctx); err != nil {
			t.Fatalf("a Get after the keep-alive lent a dead connection: %v", err)
		}
		defer r.pool.Put(c)
	}
	if got := r.opened.Load(); got != 6 {
		t.Errorf("opened %d, want 6: 3, then 3 to replace the dead", got)
	}
}
