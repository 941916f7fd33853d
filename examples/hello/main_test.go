package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestREADMEBlock checks that the README's first Go block is this program,
// word for word, so what a reader pastes is what this package builds.
func TestREADMEBlock(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```go\n")
	if !ok {
		t.Fatal("README.md has no Go block")
	}
	block, _, ok := strings.Cut(rest, "```\n")
	if !ok {
		t.Fatal("README.md's first Go block does not end")
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	// The package comment is for go doc; the README starts at package main.
	_, program, _ := strings.Cut(string(src), "package main\n")
	if block != "package main\n"+program {
		t.Errorf("README.md's first Go block differs from examples/hello/main.go:\n%s", block)
	}
}

// TestRun runs the program and reads what it printed: the burst of three
// on one connection, then the quota's refusal.
func TestRun(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	main()
	os.Stdout = stdout
	w.Close()
	var out bytes.Buffer
	io.Copy(&out, r)
	want := `request 1: 200, 1 connection(s) opened
request 2: 200, 1 connection(s) opened
request 3: 200, 1 connection(s) opened
request 4: 429, Retry-After: 1
`
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
}
