// Package pgtest runs a throwaway PostgreSQL cluster for the tests and the
// bench that need a real database: initdb into a temporary directory, a
// postmaster on a free 127.0.0.1 port started with pg_ctl, and, at Stop,
// the server killed and the directory removed.
//
// It uses the server binaries already on the machine (Debian's postgresql
// package puts them in /usr/lib/postgresql/<version>/bin) and downloads
// nothing. initdb and pg_ctl refuse to run as root, so a root process runs
// them as the postgres user, which that package creates.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/internal/loopback"
)

// ErrNoServer says the machine cannot run a PostgreSQL server: its binaries
// are not installed, or the process is root and there is no postgres user
// to run them as. Start's errors wrap it in those cases only.
var ErrNoServer = errors.New("pgtest: no PostgreSQL server here (initdb, pg_ctl, postgres); get them with `apt-get install postgresql`")

// Server is one running throwaway cluster. Build it with Start or New; the
// zero Server is not usable. Its methods are safe for concurrent use.
type Server struct {
	bin  string // holds initdb, pg_ctl and postgres
	dir  string // the temporary directory: data/, the log, the socket
	port int
	cred *syscall.Credential // the postgres user's, when we are root

	mu      sync.Mutex
	stopped bool
}

// Bin is the directory holding initdb, pg_ctl and postgres: the one initdb
// is found in on PATH, else /usr/local/bin, else the newest
// /usr/lib/postgresql/<version>/bin. It returns an error wrapping
// ErrNoServer when there is none.
func Bin() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	dirs = append(dirs, localBin)
	versions, _ := filepath.Glob(debianBins)
	// Newest first: "16" before "15", "9.6" last.
	slices.SortFunc(versions, func(a, b string) int {
		va, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(a)), 64)
		vb, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(b)), 64)
		switch {
		case va > vb:
			return -1
		case va < vb:
			return 1
		}
		return 0
	})
	for _, d := range append(dirs, versions...) {
		if complete(d) {
			return d, nil
		}
	}
	return "", ErrNoServer
}

// Where Bin looks after PATH; variables so a test can point them elsewhere.
var (
	localBin   = "/usr/local/bin"
	debianBins = "/usr/lib/postgresql/*/bin"
)

// complete says whether dir holds all three programs a cluster needs.
func complete(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// settings go into the cluster's postgresql.conf. TCP on loopback only,
// the socket in our own directory (the system's may not be writable), room
// for the bench's pools side by side, and durability off: the cluster is
// thrown away, and fsync on a shared disk would measure the disk.
const settings = `
listen_addresses = '127.0.0.1'
unix_socket_directories = '%s'
max_connections = 300
shared_buffers = 32MB
fsync = off
synchronous_commit = off
full_page_writes = off
`

// Start makes and starts a new cluster, returning once it accepts
// connections. It blocks for as long as initdb and the server's start take
// (a few seconds), within ctx. It returns an error wrapping ErrNoServer when
// the machine cannot run a server, and another error (with the end of the
// server's log) when it can but the cluster would not start; it leaves
// nothing behind in either case. Stop the Server when done.
func Start(ctx context.Context) (*Server, error) {
	s, err := available()
	if err != nil {
		return nil, err
	}
	if s.dir, err = os.MkdirTemp("", "moonpool-pg-"); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if err := s.start(ctx); err != nil {
		s.remove()
		return nil, err
	}
	return s, nil
}

// available is a Server not yet started: the binaries, and the user to
// run them as. Its error wraps ErrNoServer.
func available() (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin}
	if os.Geteuid() == 0 {
		if s.cred, err = postgresUser(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// postgresUser is the credential to run the server's programs with as root.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("%w: running as root, and no postgres user to run the server as: %v", ErrNoServer, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgtest: postgres user's ids %q/%q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (s *Server) start(ctx context.Context) error {
	if s.cred != nil {
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
	}
	if _, err := s.run(ctx, "initdb", "-D", s.data(), "-U", "postgres", "--auth=trust", "--no-sync", "--no-locale", "-E", "UTF8"); err != nil {
		return err
	}
	// Appending keeps the file's owner, the postgres user.
	f, err := os.OpenFile(filepath.Join(s.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	_, err = fmt.Fprintf(f, settings, s.dir)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	// The port is free when asked, not necessarily when the server binds
	// it: another process may take it in between, so try a few.
	for try := 0; ; try++ {
		if s.port, err = loopback.FreePort(); err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
		// -p is remembered in postmaster.opts, so Restart keeps the port.
		_, err = s.run(ctx, "pg_ctl", "start", "-D", s.data(), "-l", s.log(), "-w", "-t", "60", "-s", "-o", "-p "+strconv.Itoa(s.port))
		if err == nil || try == 2 || ctx.Err() != nil || !strings.Contains(s.tail(), "could not bind") {
			return err
		}
	}
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }
func (s *Server) log() string  { return filepath.Join(s.dir, "log") }

// run runs one of the server's programs as the user that may run it, and
// returns its output, or an error with the output and the log's end.
func (s *Server) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir // the caller's directory may be closed to the postgres user
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	// The server pg_ctl starts writes to the log, not to our pipe; should
	// it hold the pipe all the same, Wait gives up on it after this.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("pgtest: %s %s: %w\n%s%s", name, strings.Join(args, " "), err, out, s.tail())
	}
	return out, nil
}

// tail is the end of the server's log, for an error message.
func (s *Server) tail() string {
	b, err := os.ReadFile(s.log())
	if err != nil || len(b) == 0 {
		return ""
	}
	const most = 2000
	if len(b) > most {
		b = b[len(b)-most:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return "server log:\n" + string(b)
}

// Port is the TCP port the server listens on, on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// ConnString is a keyword/value connection string for the cluster's
// superuser, postgres, over TCP without TLS (the cluster has none): what
// pgx.ParseConfig and pgxpool.ParseConfig take.
func (s *Server) ConnString() string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres sslmode=disable", s.port)
}

// Restart restarts the server as pg_ctl restart -m fast does: every
// session is ended, the server shuts down and starts again on the same
// port. It blocks until the server accepts connections again, within ctx.
func (s *Server) Restart(ctx context.Context) error {
	_, err := s.run(ctx, "pg_ctl", "restart", "-D", s.data(), "-l", s.log(), "-m", "fast", "-w", "-t", "60", "-s")
	return err
}

// Stop kills the server without a checkpoint (nothing in it is kept) and
// removes its directory. It blocks until the server has exited, within a
// minute. Calling it again does nothing and returns nil.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	s.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := s.run(ctx, "pg_ctl", "stop", "-D", s.data(), "-m", "immediate", "-w", "-t", "50", "-s")
	if err != nil {
		// pg_ctl could not stop it: the postmaster's pid is the first line
		// of postmaster.pid, and SIGQUIT is an immediate shutdown.
		if b, rerr := os.ReadFile(filepath.Join(s.data(), "postmaster.pid")); rerr == nil {
			first, _, _ := strings.Cut(string(b), "\n")
			if pid, perr := strconv.Atoi(strings.TrimSpace(first)); perr == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGQUIT)
			}
		}
	}
	if rerr := s.remove(); err == nil {
		err = rerr
	}
	return err
}

func (s *Server) remove() error {
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return nil
}

// New starts a server for t and stops it when t and its subtests end.
// Where the machine cannot run one, New skips t with one line saying why
// and how to get the server; under CI (CI=true in the environment) it
// fails t instead, because CI installs the server and a skip there would
// hide a broken install. A server that is there but will not start fails t.
func New(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx)
	if err != nil {
		skipOrFail(t, err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stopping the server: %v", err)
		}
	})
	return s
}

// Require skips or fails t as New does when the machine cannot run a
// server, and otherwise does nothing: for a test whose code starts its own.
func Require(t testing.TB) {
	t.Helper()
	if _, err := available(); err != nil {
		skipOrFail(t, err)
	}
}

// skipOrFail ends t for err: a skip when the machine has no server and
// this is not CI, a failure otherwise.
func skipOrFail(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNoServer) && os.Getenv("CI") != "true" {
		t.Skip(err)
		return
	}
	t.Fatal(err)
}
