package redistest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Silent is a server that accepts connections, reads what clients send and
// never answers: a Redis that hangs. It is how a test shows that a limiter
// keeps its own timeout whatever the client does with a ctx's deadline.
type Silent struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{} // nil once closed
}

// NewSilent starts a Silent on a free 127.0.0.1 port and closes it, and
// every connection it accepted, when t ends.
func NewSilent(t testing.TB) *Silent {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Silent{ln: ln, conns: make(map[net.Conn]struct{})}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

// Addr is where clients connect.
func (s *Silent) Addr() string { return s.ln.Addr().String() }

func (s *Silent) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.conns == nil {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			io.Copy(io.Discard, c) // so a client's writes never block
			c.Close()
		}()
	}
}

func (s *Silent) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.conns = nil
	s.mu.Unlock()
	s.wg.Wait()
}
