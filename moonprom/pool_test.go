package moonprom_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/moonprom"
	"github.com/moonpool-go/moonpool/policy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newPool is a pool of fresh *int on an engine with a virtual clock, both
// gone with the test; broken makes its next Open fail.
func newPool(t testing.TB, limits policy.Limits, broken *bool) (*vclock.Virtual, *client.Pool[*int]) {
	t.Helper()
	clock := vclock.NewVirtual()
	eng := engine.New(engine.WithClock(clock))
	t.Cleanup(func() { eng.Shutdown(context.Background()) })
	p, err := client.NewPool(eng, client.PoolConfig[*int]{
		Open: func(context.Context) (*int, error) {
			if broken != nil && *broken {
				return nil, errors.New("refused")
			}
			return new(int), nil
		},
		Limits: limits,
	})
	if err != nil {
		t.Fatal(err)
	}
	return clock, p
}

// A pool after two loans, a failed open, a wait of 1.5 s, one resource
// broken and one put back past the idle limit, in Prometheus's text form.
func TestPoolCollector(t *testing.T) {
	broken := false
	clock, pool := newPool(t, policy.Limits{Size: 2, Idle: 1}, &broken)
	ctx := t.Context()
	a, _ := pool.Get(ctx)
	b, _ := pool.Get(ctx)
	got := make(chan *int, 1)
	go func() { c, _ := pool.Get(ctx); got <- c }()
	for pool.Stats().Waiting() != 1 {
		runtime.Gosched() // nothing else signals that the Get is in line
	}
	clock.Advance(1500 * time.Millisecond)
	pool.Put(a)
	a = <-got
	pool.Discard(b)
	broken = true
	if _, err := pool.Get(ctx); err == nil {
		t.Fatal("an Open that fails gave a resource")
	}
	broken = false
	b, _ = pool.Get(ctx)
	pool.Put(a)
	pool.Put(b) // past the idle limit of one: closed as surplus

	c := moonprom.NewPoolCollector(pool, "db", policy.Limits{Size: 2, Idle: 1})
	want := `
# HELP moonpool_pool_backoff_hold_seconds How much longer the ward's backoff holds opens back.
# TYPE moonpool_pool_backoff_hold_seconds gauge
moonpool_pool_backoff_hold_seconds{pool="db"} 0
# HELP moonpool_pool_breaker_refusal_ratio Share of opens the ward's breaker refuses now.
# TYPE moonpool_pool_breaker_refusal_ratio gauge
moonpool_pool_breaker_refusal_ratio{pool="db"} 0
# HELP moonpool_pool_busy Resources lent out or being opened.
# TYPE moonpool_pool_busy gauge
moonpool_pool_busy{pool="db"} 0
# HELP moonpool_pool_cancelled_total Gets whose ctx ended while they waited in line.
# TYPE moonpool_pool_cancelled_total counter
moonpool_pool_cancelled_total{pool="db"} 0
# HELP moonpool_pool_close_failures_total Closes that failed or panicked.
# TYPE moonpool_pool_close_failures_total counter
moonpool_pool_close_failures_total{pool="db"} 0
# HELP moonpool_pool_closed_total Resources the pool let go, by reason.
# TYPE moonpool_pool_closed_total counter
moonpool_pool_closed_total{pool="db",reason="broken"} 1
moonpool_pool_closed_total{pool="db",reason="evicted"} 0
moonpool_pool_closed_total{pool="db",reason="shutdown"} 0
moonpool_pool_closed_total{pool="db",reason="stale"} 0
moonpool_pool_closed_total{pool="db",reason="surplus"} 1
# HELP moonpool_pool_duplicates_total Resources an Open made that the pool already held.
# TYPE moonpool_pool_duplicates_total counter
moonpool_pool_duplicates_total{pool="db"} 0
# HELP moonpool_pool_held_past_deadline_total Gets refused at once because the ward's hold would outlast their deadline.
# TYPE moonpool_pool_held_past_deadline_total counter
moonpool_pool_held_past_deadline_total{pool="db"} 0
# HELP moonpool_pool_held_total Opens the ward held back, by reason.
# TYPE moonpool_pool_held_total counter
moonpool_pool_held_total{pool="db",reason="backoff"} 0
moonpool_pool_held_total{pool="db",reason="bucket"} 0
moonpool_pool_held_total{pool="db",reason="probe"} 0
# HELP moonpool_pool_idle Resources idle in the pool, ready to lend.
# TYPE moonpool_pool_idle gauge
moonpool_pool_idle{pool="db"} 1
# HELP moonpool_pool_live Resources that exist: idle, lent and being opened.
# TYPE moonpool_pool_live gauge
moonpool_pool_live{pool="db"} 1
# HELP moonpool_pool_made_total Resources opened and taken on by the pool.
# TYPE moonpool_pool_made_total counter
moonpool_pool_made_total{pool="db"} 3
# HELP moonpool_pool_make_failures_total Opens that failed.
# TYPE moonpool_pool_make_failures_total counter
moonpool_pool_make_failures_total{pool="db"} 1
# HELP moonpool_pool_max_idle Most resources the pool keeps idle.
# TYPE moonpool_pool_max_idle gauge
moonpool_pool_max_idle{pool="db"} 1
# HELP moonpool_pool_max_live Most resources the pool may hold at once.
# TYPE moonpool_pool_max_live gauge
moonpool_pool_max_live{pool="db"} 2
# HELP moonpool_pool_panics_total Opens and Closes that panicked.
# TYPE moonpool_pool_panics_total counter
moonpool_pool_panics_total{pool="db"} 0
# HELP moonpool_pool_shed_total Gets refused, by reason.
# TYPE moonpool_pool_shed_total counter
moonpool_pool_shed_total{pool="db",reason="breaker"} 0
moonpool_pool_shed_total{pool="db",reason="closed"} 0
moonpool_pool_shed_total{pool="db",reason="shedder"} 0
moonpool_pool_shed_total{pool="db",reason="too_many_waiting"} 0
# HELP moonpool_pool_wait_seconds_total Time Gets spent waiting in line.
# TYPE moonpool_pool_wait_seconds_total counter
moonpool_pool_wait_seconds_total{pool="db"} 1.5
# HELP moonpool_pool_waited_total Gets answered after waiting in line.
# TYPE moonpool_pool_waited_total counter
moonpool_pool_waited_total{pool="db"} 1
# HELP moonpool_pool_waiting Gets waiting in line for a resource.
# TYPE moonpool_pool_waiting gauge
moonpool_pool_waiting{pool="db"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// Several pools share one registry, told apart by their const label, and
// the names pass Prometheus's lint. Limits of zero (none) are left out.
func TestPoolCollectorsShareARegistry(t *testing.T) {
	_, users := newPool(t, policy.DefaultLimits, nil)
	_, orders := newPool(t, policy.Limits{}, nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(
		moonprom.NewPoolCollector(users, "users", policy.DefaultLimits),
		moonprom.NewPoolCollector(orders, "orders", policy.Limits{}),
	)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	c, err := users.Get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer users.Put(c)
	want := `
# HELP moonpool_pool_busy Resources lent out or being opened.
# TYPE moonpool_pool_busy gauge
moonpool_pool_busy{pool="orders"} 0
moonpool_pool_busy{pool="users"} 1
# HELP moonpool_pool_max_live Most resources the pool may hold at once.
# TYPE moonpool_pool_max_live gauge
moonpool_pool_max_live{pool="users"} 10
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "moonpool_pool_busy", "moonpool_pool_max_live"); err != nil {
		t.Error(err)
	}
}

// A nil pool collects nothing rather than panicking in a scrape.
func TestPoolCollectorNilPool(t *testing.T) {
	var none *client.Pool[*int]
	for _, p := range []moonprom.Pool{nil, none} {
		if n := testutil.CollectAndCount(moonprom.NewPoolCollector(p, "x", policy.DefaultLimits)); n != 0 {
			t.Errorf("%T: %d metrics collected, want 0", p, n)
		}
	}
}
