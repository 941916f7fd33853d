package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/moonpool-go/moonpool/internal/pgtest"
	"github.com/moonpool-go/moonpool/internal/redistest"
)

// TestPostgresFleetWithoutRedis runs the Postgres suite on a machine with
// no redis-server: the restart still runs its other sides, the fleet side
// is listed with a note saying why it did not run, and its target is not
// measured.
func TestPostgresFleetWithoutRedis(t *testing.T) {
	pgtest.Require(t)
	old := startRedis
	t.Cleanup(func() { startRedis = old })
	startRedis = func(context.Context, string) (*redistest.Server, error) { return nil, redistest.ErrNoServer }
	var stdout, stderr bytes.Buffer
	if err := run(configs["smoke"], "Postgres", "", &stdout, &stderr, false); err != nil {
		t.Fatalf("run: %v", err)
	}
	var fleet, target string
	for _, l := range strings.Split(stdout.String(), "\n") {
		switch {
		case strings.Contains(l, pgFleetSide+" ") && strings.Contains(l, "skipped"):
			fleet = l
		case strings.Contains(l, "moonpool fleet's first success"):
			target = l
		}
	}
	if !strings.Contains(fleet, "apt-get install redis-server") {
		t.Errorf("want the fleet side's row to say it was skipped and how to get redis-server; stdout:\n%s", stdout.String())
	}
	if !strings.Contains(target, "not measured") {
		t.Errorf("want the fleet's target not measured; got %q", target)
	}
	if !strings.Contains(stdout.String(), "pgxpool") {
		t.Errorf("the restart's other sides did not run; stdout:\n%s", stdout.String())
	}
}
