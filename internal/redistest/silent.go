package redistest

import (
	"io"
	"testing"
)

// Silent is a server that accepts connections, reads what clients send and
// never answers: a Redis that hangs. It is how a test shows that a limiter
// keeps its own timeout whatever the client does with a ctx's deadline.
type Silent struct{ *listener }

// NewSilent starts a Silent on a free 127.0.0.1 port and closes it, and
// every connection it accepted, when t ends.
func NewSilent(t testing.TB) *Silent {
	t.Helper()
	l, err := listen()
	if err != nil {
		t.Fatal(err)
	}
	s := &Silent{l}
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
		if !s.track(c) {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			io.Copy(io.Discard, c) // so a client's writes never block
			c.Close()
		}()
	}
}
