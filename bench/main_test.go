package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/pgtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// peers are the libraries bench compares against. Only bench may build
// them: a user of moonpool's packages must never pull them in.
var peers = []string{
	"github.com/jackc/puddle/v2",
	"golang.org/x/time",
	"golang.org/x/sync",
	"github.com/sony/gobreaker/v2",
	"github.com/jackc/pgx/v5", // pgxpool and the database/sql driver are in it
	"github.com/go-redis/redis_rate/v10",
}

// modulesOf lists the modules whose packages pkgs depend on, run from the
// module's root.
func modulesOf(t *testing.T, pkgs ...string) map[string]bool {
	t.Helper()
	mods := map[string]bool{}
	for _, m := range strings.Fields(goList(t, "{{with .Module}}{{.Path}}{{end}}", pkgs...)) {
		mods[m] = true
	}
	return mods
}

// goList runs go list -deps -f format over pkgs from the module's root and
// returns what it printed.
func goList(t *testing.T, format string, pkgs ...string) string {
	t.Helper()
	args := append([]string{"list", "-deps", "-f", format}, pkgs...)
	cmd := exec.Command(goCommand(t), args...)
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	return string(out)
}

// goCommand is the go command on PATH, else the one in GOROOT.
func goCommand(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	t.Fatal("no go command on PATH or in GOROOT")
	return ""
}

// integrations are the libraries moonpool's integration packages (moongrpc,
// moonotel, moonprom) are built on, each package beside the library that
// names it. protoactor-go brings otel and client_golang into the library's
// build already; gRPC and its status details it does not, and must never
// come in through the library.
var integrations = map[string]string{
	"google.golang.org/grpc":                    "./moongrpc",
	"google.golang.org/genproto/googleapis/rpc": "./moongrpc",
	"go.opentelemetry.io/otel/metric":           "./moonotel",
	"github.com/prometheus/client_golang":       "./moonprom",
	"github.com/redis/go-redis/v9":              "./moonredis",
}

// libraryImports checks that the library's own packages import nothing but
// the standard library, one another and protoactor-go: whatever else their
// build holds (otel, client_golang) comes through protoactor-go, so no
// integration reaches a user who does not import it.
func libraryImports(t *testing.T, lib map[string]bool) {
	t.Helper()
	const self = "github.com/moonpool-go/moonpool"
	for _, m := range []string{"google.golang.org/grpc", "google.golang.org/genproto/googleapis/rpc"} {
		if lib[m] {
			t.Errorf("the library's packages depend on %s; only moongrpc and examples may", m)
		}
	}
	out := goList(t, `{{with .Module}}{{if eq .Path "`+self+`"}}{{$.ImportPath}}{{range $.Imports}} {{.}}{{end}}{{"\n"}}{{end}}{{end}}`,
		"./policy", "./actors", "./engine", "./client")
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		for _, imp := range strings.Fields(imports) {
			first, _, _ := strings.Cut(imp, "/")
			if strings.Contains(first, ".") && !strings.HasPrefix(imp, self+"/") && !strings.HasPrefix(imp, "github.com/asynkron/protoactor-go/") {
				t.Errorf("%s imports %s; the library may import only the standard library, itself and protoactor-go", pkg, imp)
			}
		}
	}
	// The integrations themselves do depend on their libraries, so the
	// checks above are looking at the right names.
	for m, pkg := range integrations {
		if !modulesOf(t, pkg)[m] {
			t.Errorf("%s does not depend on %s: is the list of integrations stale?", pkg, m)
		}
	}
}

func TestLibraryImportsNoPeers(t *testing.T) {
	lib := modulesOf(t, "./policy", "./actors", "./engine", "./client")
	if !lib["github.com/moonpool-go/moonpool"] {
		t.Fatalf("go list named none of moonpool's own packages: %v", lib)
	}
	for _, p := range peers {
		if lib[p] {
			t.Errorf("the library's packages depend on %s; only bench, examples and internal/pgtest may", p)
		}
	}
	libraryImports(t, lib)
	// The same listing for bench itself names every peer, so the check
	// above is looking in the right place.
	b := modulesOf(t, "./bench")
	for _, p := range peers {
		if !b[p] {
			t.Errorf("bench does not depend on %s: is the list of peers stale?", p)
		}
	}
}

// TestSidesDoTheSameWork runs every side of every row a few hundred times
// and checks it did the work the row says it does, so a comparison never
// sets a side that fails fast against one that works.
func TestSidesDoTheSameWork(t *testing.T) {
	cfg := configs["smoke"]
	for _, s := range suites {
		if s.rows == nil {
			continue // a suite with a server of its own: TestPostgresSuite
		}
		eng := engine.New()
		for _, r := range s.rows(eng, cfg) {
			for _, sd := range r.sides {
				const ops = 300
				callers := r.callers[len(r.callers)-1] // the core runs on one goroutine only
				c, err := sd.build(callers)
				if err != nil {
					t.Fatalf("%s %s %s: %v", r.suite, r.name, sd.name, err)
				}
				fixed := ops
				if r.fixed > 0 {
					fixed = min(ops, r.fixed)
				}
				sl := runSlice(c, callers, 0, fixed, r.batch, 10, 100, false)
				c.close()
				what := r.suite + " " + r.name + " " + sd.name
				if sl.ops != int64(fixed) {
					t.Errorf("%s: ran %d operations, want %d", what, sl.ops, fixed)
				}
				if sl.errs != 0 {
					t.Errorf("%s: %d operations failed", what, sl.errs)
				}
				if len(sl.lat) == 0 {
					t.Errorf("%s: no call was timed", what)
				}
				switch r.count {
				case countAllowed:
					if sl.count != sl.ops {
						t.Errorf("%s: allowed %d of %d; the row compares calls that are let through", what, sl.count, sl.ops)
					}
				case countBackend:
					// Ten: a fresh policy breaker refuses nothing below its
					// floor of ten requests (policy.DefaultBreaker).
					if sl.count < 1 || sl.count > 10+sl.ops/4 {
						t.Errorf("%s: %d of %d attempts reached the dead backend; want at least one and at most ten and a quarter", what, sl.count, sl.ops)
					}
				}
			}
		}
		if err := eng.Shutdown(t.Context()); err != nil {
			t.Errorf("%s: shutdown: %v", s.name, err)
		}
	}
}

// TestRunSmoke runs the whole command in its smallest configuration and
// checks that it reports every suite, the targets, and writes the files
// -out promises. It asserts no time.
func TestRunSmoke(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run(configs["smoke"], "", dir, &stdout, &stderr, false); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	table := stdout.String()
	for _, want := range []string{"POOL", "RATE", "GATE", "BREAKER", "CORE", "KEYED", "TARGETS", "puddle", "x/time/rate", "semaphore", "gobreaker", "map+rate", "B/key", "backend "} {
		if !strings.Contains(table, want) {
			t.Errorf("the table has no %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "not measured") {
		t.Errorf("a target went unmeasured in a full run:\n%s", table)
	}
	if !strings.Contains(stderr.String(), "done in") {
		t.Errorf("no progress on stderr: %q", stderr.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Targets", "## Pool", "## Keyed", "| callers | side |", "Machine:", "go run ./bench -smoke"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md has no %q", want)
		}
	}
	// A plot for every row measured at more than one level of callers.
	for _, name := range []string{"pool-size-10.svg", "pool-size-1000.svg", "rate-allow.svg", "gate-enter-leave.svg", "breaker-outage.svg", "keyed-allow-500-keys.svg"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("no plot: %v", err)
			continue
		}
		if err := wellFormed(f); err != nil {
			t.Errorf("%s is not well-formed XML: %v", name, err)
		}
		f.Close()
	}
}

func wellFormed(r io.Reader) error {
	d := xml.NewDecoder(r)
	for {
		if _, err := d.Token(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

func TestOnlyPicksSuites(t *testing.T) {
	got, err := pick("core, Rate")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].name != "Rate" || got[1].name != "Core" {
		t.Errorf("pick(\"core, Rate\") = %v, want Rate then Core", got)
	}
	if _, err := pick("Pool,Nope"); err == nil {
		t.Error("pick accepted a suite that does not exist")
	}
	// The slow suite runs only when named.
	all, _ := pick("")
	for _, s := range all {
		if s.name == "Postgres" {
			t.Error("a run that names no suite includes Postgres")
		}
	}
	if got, err := pick("postgres"); err != nil || len(got) != 1 || got[0].name != "Postgres" {
		t.Errorf("pick(\"postgres\") = %v, %v; want Postgres", got, err)
	}
}

func TestMedianAndQuantile(t *testing.T) {
	tests := []struct {
		xs       []float64
		med, p99 float64
	}{
		{[]float64{5}, 5, 5},
		{[]float64{1, 3}, 2, 3},
		{[]float64{3, 1, 2}, 2, 3},
	}
	for i, tc := range tests {
		if got := median(tc.xs); got != tc.med {
			t.Errorf("step %d: median(%v) = %v, want %v", i, tc.xs, got, tc.med)
		}
	}
	sorted := make([]float64, 1000)
	for i := range sorted {
		sorted[i] = float64(i + 1)
	}
	if got := quantile(sorted, 0.99); got != 990 {
		t.Errorf("p99 of 1..1000 = %v, want 990", got)
	}
	if got := quantile(sorted, 0.5); got != 500 {
		t.Errorf("p50 of 1..1000 = %v, want 500", got)
	}
	if got := median(nil); got == got {
		t.Errorf("median of nothing = %v, want NaN", got)
	}
}

// TestPostgresSidesDoTheSameWork runs each side of the Postgres suite
// against a real server: every request succeeds, and no side dials more
// connections than the size it was given, counted at its dialer.
func TestPostgresSidesDoTheSameWork(t *testing.T) {
	srv := pgtest.New(t)
	eng := engine.New()
	defer eng.Shutdown(context.Background())
	const size, callers, ops = 4, 8, 200
	for _, s := range dbSides(eng, srv) {
		for _, q := range queries {
			db, err := s.build(size)
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			c := db.contender(q, s.name)
			sl := runSlice(c, callers, 0, ops, 1, 1, 100, false)
			c.close()
			what := s.name + " " + q.name
			if sl.ops != ops || sl.errs != 0 {
				t.Errorf("%s: %d requests, %d failed; want %d, none failed", what, sl.ops, sl.errs, ops)
			}
			if n := db.dials.Load(); n < 1 || n > size {
				t.Errorf("%s: dialled %d times for a pool of %d", what, n, size)
			}
		}
	}
}

// TestPostgresSuite runs the whole suite in its smallest configuration,
// restart included, and checks what it reports. It asserts no time.
func TestPostgresSuite(t *testing.T) {
	pgtest.Require(t)
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run(configs["smoke"], "Postgres", dir, &stdout, &stderr, false); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, stderr.String())
	}
	table := stdout.String()
	for _, want := range []string{"POSTGRES", "SELECT 1 size=4", "pg_sleep(0.001) size=4", "pgxpool", "database/sql", "p999", "opened",
		"restart, SELECT 1 at 200/s", "dials during restart", "TARGETS: PostgreSQL", "Postgres restart: no more failed requests than pgxpool"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table has no %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "TARGETS: pure core") {
		t.Errorf("a run of Postgres alone lists the pure core's targets, none of them measured:\n%s", table)
	}
	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Targets: PostgreSQL", "## Postgres", "### Postgres restart", "| side | requests | failed |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md has no %q:\n%s", want, md)
		}
	}
}

// TestPostgresWithoutServer checks that -only Postgres on a machine with
// no PostgreSQL says so in one line, with how to get it, and fails nothing.
func TestPostgresWithoutServer(t *testing.T) {
	old := startServer
	t.Cleanup(func() { startServer = old })
	startServer = func(context.Context) (*pgtest.Server, error) { return nil, pgtest.ErrNoServer }
	var stdout, stderr bytes.Buffer
	if err := run(configs["smoke"], "Postgres", "", &stdout, &stderr, false); err != nil {
		t.Fatalf("run: %v", err)
	}
	var said []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, "Postgres skipped") {
			said = append(said, l)
		}
	}
	if len(said) != 1 || !strings.Contains(said[0], "apt-get install postgresql") {
		t.Errorf("want one line saying Postgres was skipped and how to get it; stderr:\n%s", stderr.String())
	}
}
