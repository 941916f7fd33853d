package redistest

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy stands between a client and a Redis server and passes bytes both
// ways, except that, once armed, it drops the reply to the next script
// call (EVAL or EVALSHA) and closes that connection: the script ran, and
// the client never hears so. It is how a test shows that a command sent
// again after a network error is counted once.
type Proxy struct {
	ln      net.Listener
	target  string
	armed   atomic.Int32 // replies still to drop
	dropped atomic.Int32
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
}

// NewProxy starts a proxy to target on a free 127.0.0.1 port and closes it
// when t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
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

// track notes a pair of connections to close with the proxy; false when
// the proxy is closed already.
func (p *Proxy) track(c, s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		c.Close()
		s.Close()
		return false
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	return true
}

func (p *Proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
