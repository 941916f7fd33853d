package redistest

import (
	"bytes"
	"net"
	"sync/atomic"
	"testing"
)

// Proxy stands between a client and a Redis server and passes bytes both
// ways, except that, once armed, it drops the reply to the next script
// call (EVAL or EVALSHA) and closes that connection: the script ran, and
// the client never hears so. It is how a test shows that a command sent
// again after a network error is counted once.
type Proxy struct {
	*listener
	target  string
	armed   atomic.Int32 // replies still to drop
	dropped atomic.Int32
}

// NewProxy starts a proxy to target on a free 127.0.0.1 port and closes it
// when t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	l, err := listen()
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{listener: l, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// DropNext makes the proxy drop the replies to the next n script calls.
func (p *Proxy) DropNext(n int) { p.armed.Store(int32(n)) }

// Dropped is how many replies the proxy has dropped.
func (p *Proxy) Dropped() int { return int(p.dropped.Load()) }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		var script atomic.Bool // a script call went out on this connection
		p.wg.Add(2)
		go func() { // client to server
			defer p.wg.Done()
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if bytes.Contains(bytes.ToUpper(buf[:n]), []byte("EVAL")) && p.armed.Load() > 0 {
						script.Store(true)
					}
					if _, err := s.Write(buf[:n]); err != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			s.Close()
			c.Close()
		}()
		go func() { // server to client
			defer p.wg.Done()
			buf := make([]byte, 64<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 {
					if script.Load() && p.take() {
						p.dropped.Add(1)
						break // the reply is lost with the connection
					}
					if _, err := c.Write(buf[:n]); err != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			s.Close()
			c.Close()
		}()
	}
}

// take spends one armed drop, if any is left.
func (p *Proxy) take() bool {
	for {
		n := p.armed.Load()
		if n <= 0 {
			return false
		}
		if p.armed.CompareAndSwap(n, n-1) {
			return true
		}
	}
}
