package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestServerLifecycle starts a cluster, queries it, restarts it (the
// session open before the restart is ended by it, a new one works, on the
// same port) and stops it, which removes its directory.
func TestServerLifecycle(t *testing.T) {
	s := New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	before, err := pgx.Connect(ctx, s.ConnString())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer before.Close(ctx)
	var n int
	if err := before.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil || n != 1 {
		t.Fatalf("SELECT 1 = %d, %v", n, err)
	}

	if err := s.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := before.QueryRow(ctx, "SELECT 1").Scan(&n); err == nil {
		t.Error("a session from before the restart still answers; the restart ended nothing")
	}
	after, err := pgx.Connect(ctx, s.ConnString())
	if err != nil {
		t.Fatalf("connect after the restart: %v", err)
	}
	if err := after.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil || n != 1 {
		t.Fatalf("SELECT 1 after the restart = %d, %v", n, err)
	}
	after.Close(ctx)

	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := os.Stat(s.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the cluster's directory is still there after Stop: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
	if _, err := pgx.Connect(ctx, s.ConnString()); err == nil {
		t.Error("the server still accepts connections after Stop")
	}
}

// TestBinLooksInEachPlace checks the order Bin searches in: PATH, then
// /usr/local/bin, then Debian's directories newest first, and that a
// directory missing one of the three programs does not count.
func TestBinLooksInEachPlace(t *testing.T) {
	root := t.TempDir()
	mk := func(dir string, names ...string) string {
		d := filepath.Join(root, dir)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(d, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	all := []string{"initdb", "pg_ctl", "postgres"}
	local := mk("local")
	mk("lib/9.6/bin", all...)
	v16 := mk("lib/16/bin", all...)
	mk("lib/17/bin", "initdb", "pg_ctl") // no postgres: incomplete
	onPath := mk("path", all...)

	oldLocal, oldDebian := localBin, debianBins
	t.Cleanup(func() { localBin, debianBins = oldLocal, oldDebian })
	localBin, debianBins = local, filepath.Join(root, "lib/*/bin")

	steps := []struct {
		path string
		do   func()
		want string
	}{
		{path: "", want: v16},
		{path: onPath, want: onPath},
		{path: "", do: func() { mk("local", all...) }, want: local},
		{path: "", do: func() { os.RemoveAll(local); os.RemoveAll(filepath.Join(root, "lib")) }, want: ""},
	}
	for i, st := range steps {
		t.Setenv("PATH", st.path)
		if st.do != nil {
			st.do()
		}
		got, err := Bin()
		if st.want == "" {
			if !errors.Is(err, ErrNoServer) {
				t.Errorf("step %d: Bin() = %q, %v; want ErrNoServer", i, got, err)
			}
			continue
		}
		if err != nil || got != st.want {
			t.Errorf("step %d: Bin() = %q, %v; want %q", i, got, err, st.want)
		}
	}
}

// verdict records how skipOrFail ended a test, without ending this one.
type verdict struct {
	testing.TB
	skipped, failed []string
}

func (v *verdict) Helper()           {}
func (v *verdict) Skip(args ...any)  { v.skipped = append(v.skipped, fmt.Sprint(args...)) }
func (v *verdict) Fatal(args ...any) { v.failed = append(v.failed, fmt.Sprint(args...)) }

// TestSkipOnlyOutsideCI checks that a machine without a server skips in
// one line outside CI and fails under CI, and that any other trouble
// starting a server fails everywhere.
func TestSkipOnlyOutsideCI(t *testing.T) {
	noServer := fmt.Errorf("%w: running as root, and no postgres user", ErrNoServer)
	broken := errors.New("pgtest: initdb: exit status 1")
	tests := []struct {
		err  error
		ci   string
		skip bool
	}{
		{ErrNoServer, "", true},
		{noServer, "", true},
		{ErrNoServer, "true", false},
		{broken, "", false},
		{broken, "true", false},
	}
	for i, tc := range tests {
		t.Setenv("CI", tc.ci)
		v := &verdict{}
		skipOrFail(v, tc.err)
		if tc.skip {
			if len(v.skipped) != 1 || len(v.failed) != 0 || strings.Contains(v.skipped[0], "\n") {
				t.Errorf("step %d: skipped %q, failed %q; want one skip of one line", i, v.skipped, v.failed)
			}
			continue
		}
		if len(v.failed) != 1 || len(v.skipped) != 0 {
			t.Errorf("step %d: skipped %q, failed %q; want a failure", i, v.skipped, v.failed)
		}
	}
}
