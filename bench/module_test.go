package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A consumer's own pins, older than what moonpool's integrations and bench
// use, so that a library which set minimums for them would move them.
const (
	consumerRedis = "v9.5.1"
	consumerPgx   = "v5.5.0"
)

// TestConsumerKeepsItsVersions builds a program that imports only client
// beside its own go-redis and pgx, older than the ones moonpool's
// integrations use. Adding moonpool must move none of the program's
// versions, except of modules in the library's own module graph.
func TestConsumerKeepsItsVersions(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	writeFile(t, dir, "go.mod", `module example.com/consumer

go 1.26.0

require (
	github.com/jackc/pgx/v5 `+consumerPgx+`
	github.com/redis/go-redis/v9 `+consumerRedis+`
)
`)
	writeFile(t, dir, "main.go", `package main

import (
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

func main() {
	_, err := pgx.ParseConfig("postgres://127.0.0.1/db")
	fmt.Println(redis.NewClient(&redis.Options{}) != nil, err)
}
`)
	goRun(t, dir, "mod", "tidy")
	alone := moduleVersions(t, dir)

	writeFile(t, dir, "moonpool.go", `package main

import "github.com/moonpool-go/moonpool/client"

var _ = client.NewEngine
`)
	goRun(t, dir, "mod", "edit",
		"-require=github.com/moonpool-go/moonpool@v0.0.0-00010101000000-000000000000",
		"-replace=github.com/moonpool-go/moonpool="+root)
	goRun(t, dir, "mod", "tidy")
	goRun(t, dir, "build", "-mod=readonly", "-o", os.DevNull, ".")
	with := moduleVersions(t, dir)

	// The library's own module graph, listed from a copy of its go.mod so
	// that go.sum in the repository is left alone.
	lib := t.TempDir()
	for _, name := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, lib, name, string(b))
	}
	library := moduleVersions(t, lib)
	for _, m := range []struct{ path, pin string }{
		{"github.com/redis/go-redis/v9", consumerRedis},
		{"github.com/jackc/pgx/v5", consumerPgx},
	} {
		if with[m.path] != m.pin {
			t.Errorf("%s is %s with moonpool; the program pins %s", m.path, with[m.path], m.pin)
		}
	}
	for path, v := range alone {
		if with[path] != v && library[path] == "" {
			t.Errorf("moonpool moved %s from %s to %s, and the library does not need it", path, v, with[path])
		}
	}
}

// TestHelloWorldWeight builds a program that uses one client.Bucket and
// reports its size and how many packages outside the standard library it
// links. Most of them come with protoactor-go's actor package. The bounds
// catch a change that makes every user's build heavier.
func TestHelloWorldWeight(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	writeFile(t, dir, "go.mod", `module example.com/hello

go 1.26.0
`)
	writeFile(t, dir, "main.go", `package main

import (
	"context"
	"fmt"

	"github.com/moonpool-go/moonpool/client"
)

func main() {
	eng := client.NewEngine()
	defer eng.Shutdown(context.Background())
	b, _ := client.NewBucket(eng, 10, 1)
	fmt.Println(b.Allow(), b.Allow())
}
`)
	goRun(t, dir, "mod", "edit",
		"-require=github.com/moonpool-go/moonpool@v0.0.0-00010101000000-000000000000",
		"-replace=github.com/moonpool-go/moonpool="+root)
	goRun(t, dir, "mod", "tidy")
	bin := filepath.Join(dir, "hello")
	goRun(t, dir, "build", "-o", bin, ".")
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	deps := strings.Fields(goRun(t, dir, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "."))
	var own int
	for _, p := range deps {
		if strings.HasPrefix(p, "github.com/moonpool-go/moonpool/") {
			own++
		}
	}
	mb := float64(fi.Size()) / (1 << 20)
	t.Logf("hello world with one client.Bucket: %.1f MiB, %d packages outside the standard library (%d of them moonpool's)", mb, len(deps)-1, own)
	const maxMiB, maxPackages = 16, 110
	if mb > maxMiB || len(deps)-1 > maxPackages {
		t.Errorf("the build grew: %.1f MiB and %d packages, above %d MiB and %d", mb, len(deps)-1, maxMiB, maxPackages)
	}
}

// repoRoot is the repository's root, the library's module.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("no go.work at %s: %v", root, err)
	}
	return root
}

func writeFile(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goRun runs the go command in dir as a module of its own, outside this
// repository's workspace, and returns what it printed.
func goRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(goCommand(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// moduleVersions is what go list -m all selects in dir.
func moduleVersions(t *testing.T, dir string) map[string]string {
	t.Helper()
	v := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(goRun(t, dir, "list", "-m", "all")), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			v[f[0]] = f[1]
		}
	}
	return v
}
