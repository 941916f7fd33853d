// Package redistest runs a throwaway redis-server for the tests and the
// bench that need a real one: on a free 127.0.0.1 port, with its working
// directory in a temporary directory, nothing saved to disk, and stopped
// (or killed and started again on the same port) when the caller says.
//
// It uses the redis-server already on the machine (Debian's redis-server
// package) and downloads nothing.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/internal/loopback"
)

// ErrNoServer says the machine has no redis-server on PATH. Start's error
// wraps it in that case only.
var ErrNoServer = errors.New("redistest: no redis-server here; get it with `apt-get install redis-server`")

// Server is one running redis-server. Build it with Start or New; the zero
// Server is not usable. Its methods are safe for concurrent use.
type Server struct {
	bin  string
	dir  string
	port int

	mu  sync.Mutex
	cmd *exec.Cmd // nil while killed or stopped
}

// Bin is the path of redis-server on PATH, or an error wrapping
// ErrNoServer.
func Bin() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", ErrNoServer
	}
	return p, nil
}

// Start starts a redis-server in dir (which the caller removes) on a free
// port, returning once it answers PING. It blocks within ctx.
func Start(ctx context.Context, dir string) (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	port, err := loopback.FreePort()
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	s := &Server{bin: bin, dir: dir, port: port}
	if err := s.Restart(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// New starts a server for t in t.TempDir and stops it when t ends. When the
// machine has no redis-server it skips t, saying how to get one; under CI
// (CI=true in the environment) it fails t instead, because CI installs the
// server and a skip there would hide a broken install.
func New(t testing.TB) *Server {
	t.Helper()
	Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Require skips or fails t as New does when there is no redis-server.
func Require(t testing.TB) {
	t.Helper()
	if _, err := Bin(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Restart starts the server again on the same port after Kill (and does
// nothing while it runs), returning once it answers PING, within ctx.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	cmd := exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--logfile", "redis.log")
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	s.cmd = cmd
	for {
		if err := ping(s.Addr()); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			s.kill()
			log, _ := os.ReadFile(s.dir + "/redis.log")
			return fmt.Errorf("redistest: no PING from redis-server: %w\n%s", ctx.Err(), log)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Kill kills the server at once, as a crash would; Restart brings it back.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
}

func (s *Server) kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Stop kills the server for good.
func (s *Server) Stop() { s.Kill() }

// ping sends PING in RESP and reads the answer.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("redistest: PING answered %q", line)
	}
	return nil
}
