// Package loopback helps the packages that start a throwaway server for a
// test (internal/pgtest, internal/redistest) pick where it listens.
package loopback

import "net"

// FreePort is a TCP port on 127.0.0.1 that nobody listened on a moment
// ago. Another process may take it before the caller's server binds it, so
// a caller that starts a server on it should be ready to try again.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
