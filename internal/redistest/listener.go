package redistest

import (
	"net"
	"sync"
)

// listener is what Proxy and Silent share: a loopback listener, the
// connections it led to, and the goroutines serving them, all ended by
// close.
type listener struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{} // nil once closed
}

func listen() (*listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &listener{ln: ln, conns: make(map[net.Conn]struct{})}, nil
}

// track notes cs to be closed with the listener, and reports false, having
// closed them, if it is closed already.
func (l *listener) track(cs ...net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		l.conns[c] = struct{}{}
	}
	return true
}

// close stops accepting, closes every connection tracked, and waits for the
// goroutines serving them.
func (l *listener) close() {
	l.ln.Close()
	l.mu.Lock()
	for c := range l.conns {
		c.Close()
	}
	l.conns = nil
	l.mu.Unlock()
	l.wg.Wait()
}
