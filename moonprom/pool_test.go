package moonprom_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/moonprom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newPool is a pool of fresh *int on an engine with a virtual clock, both
// gone with the test; broken makes its next Open fail.
func newPool(t testing.TB, limits client.Limits, broken *bool) (*vclock.Virtual, *client.Pool[*int]) {
	t.Helper()
	clock := vclock.NewVirtual()
	eng := client.NewEngine(client.WithClock(clock))
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

// waitFor waits until cond holds, and fails the test if it does not within
// ten seconds: the pool's actor answers on its own goroutine, and nothing
// else signals that a caller has joined the line or a timer's work is done.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after 10s waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// A pool after two loans, a failed open, a wait of 1.5 s, one resource
// broken and one put back past the idle limit, in Prometheus's text form.
func TestPoolCollector(t *testing.T) {
	broken := false
	clock, pool := newPool(t, client.Limits{Size: 2, Idle: 1}, &broken)
	ctx := t.Context()
	a, _ := pool.Get(ctx)
	b, _ := pool.Get(ctx)
	got := make(chan *int, 1)
	go func() { c, _ := pool.Get(ctx); got <- c }()
	waitFor(t, "the third Get to wait in line", func() bool { return pool.Stats().Waiting == 1 })
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

	c := moonprom.NewPoolCollector(pool, "db")
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
moonpool_pool_closed_total{pool="db",reason="check_failed"} 0
moonpool_pool_closed_total{pool="db",reason="evicted"} 0
moonpool_pool_closed_total{pool="db",reason="outdated"} 0
moonpool_pool_closed_total{pool="db",reason="shutdown"} 0
moonpool_pool_closed_total{pool="db",reason="stale"} 0
moonpool_pool_closed_total{pool="db",reason="surplus"} 1
moonpool_pool_closed_total{pool="db",reason="unreused"} 0
# HELP moonpool_pool_duplicates_total Resources an Open made that the pool already held.
# TYPE moonpool_pool_duplicates_total counter
moonpool_pool_duplicates_total{pool="db"} 0
# HELP moonpool_pool_empty_gets_total Gets that found nothing idle and waited in line or opened a resource.
# TYPE moonpool_pool_empty_gets_total counter
moonpool_pool_empty_gets_total{pool="db"} 5
# HELP moonpool_pool_get_seconds_total Time Gets spent waiting in line, opening and checking.
# TYPE moonpool_pool_get_seconds_total counter
moonpool_pool_get_seconds_total{pool="db"} 1.5
# HELP moonpool_pool_gets_total Gets and TryGets that asked the pool for a resource.
# TYPE moonpool_pool_gets_total counter
moonpool_pool_gets_total{pool="db"} 5
# HELP moonpool_pool_held_past_deadline_total Gets refused at once because the ward's hold would outlast their deadline.
# TYPE moonpool_pool_held_past_deadline_total counter
moonpool_pool_held_past_deadline_total{pool="db"} 0
# HELP moonpool_pool_held_total Opens the ward or its fleet held back, by reason.
# TYPE moonpool_pool_held_total counter
moonpool_pool_held_total{pool="db",reason="backoff"} 0
moonpool_pool_held_total{pool="db",reason="bucket"} 0
moonpool_pool_held_total{pool="db",reason="fleet"} 0
moonpool_pool_held_total{pool="db",reason="probe"} 0
moonpool_pool_held_total{pool="db",reason="ramp"} 0
# HELP moonpool_pool_idle Resources idle in the pool, ready to lend.
# TYPE moonpool_pool_idle gauge
moonpool_pool_idle{pool="db"} 1
# HELP moonpool_pool_leaked_total Resources reported lent for longer than LeakAfter.
# TYPE moonpool_pool_leaked_total counter
moonpool_pool_leaked_total{pool="db"} 0
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
# HELP moonpool_pool_min_idle Fewest resources the pool keeps idle, opening more in the background.
# TYPE moonpool_pool_min_idle gauge
moonpool_pool_min_idle{pool="db"} 0
# HELP moonpool_pool_panics_total Opens and Closes that panicked.
# TYPE moonpool_pool_panics_total counter
moonpool_pool_panics_total{pool="db"} 0
# HELP moonpool_pool_resets_total Calls of Reset on the open pool.
# TYPE moonpool_pool_resets_total counter
moonpool_pool_resets_total{pool="db"} 0
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
// MinIdle is reported as the pool reads it: no more than Idle.
func TestPoolCollectorsShareARegistry(t *testing.T) {
	warm := client.Limits{Size: 4, Idle: 2, MinIdle: 3}
	_, users := newPool(t, client.DefaultLimits, nil)
	_, orders := newPool(t, client.Limits{}, nil)
	_, cache := newPool(t, warm, nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(
		moonprom.NewPoolCollector(users, "users"),
		moonprom.NewPoolCollector(orders, "orders"),
		moonprom.NewPoolCollector(cache, "cache"),
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
	got := scrape(t, reg)
	for k, want := range map[string]float64{
		"moonpool_pool_busy{pool=orders}":     0,
		"moonpool_pool_busy{pool=users}":      1,
		"moonpool_pool_max_idle{pool=cache}":  2,
		"moonpool_pool_max_idle{pool=users}":  10,
		"moonpool_pool_max_live{pool=cache}":  4,
		"moonpool_pool_max_live{pool=users}":  10,
		"moonpool_pool_min_idle{pool=cache}":  2,
		"moonpool_pool_min_idle{pool=orders}": 0,
		"moonpool_pool_min_idle{pool=users}":  0,
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (reported %v), want %v", k, v, ok, want)
		}
	}
	for _, k := range []string{"moonpool_pool_max_idle{pool=orders}", "moonpool_pool_max_live{pool=orders}"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s = %v for a pool without that limit, want it left out", k, v)
		}
	}
}

// A nil pool collects nothing rather than panicking in a scrape.
func TestPoolCollectorNilPool(t *testing.T) {
	var none *client.Pool[*int]
	for _, p := range []moonprom.Pool{nil, none} {
		if n := testutil.CollectAndCount(moonprom.NewPoolCollector(p, "x")); n != 0 {
			t.Errorf("%T: %d metrics collected, want 0", p, n)
		}
	}
}

// scrape gathers reg into "name{label=value,...}" mapped to its value.
func scrape(t testing.TB, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var kv []string
			for _, l := range m.GetLabel() {
				kv = append(kv, l.GetName()+"="+l.GetValue())
			}
			got[f.GetName()+"{"+strings.Join(kv, ",")+"}"] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return got
}

// moonpool_pool_max_live, _max_idle and _min_idle are the pool's limits as
// SetLimits left them, read at each scrape. max_live and max_idle are left
// out while the pool has no such limit. min_idle is MinIdle as the pool
// reads it: no more than Idle.
func TestPoolCollectorFollowsSetLimits(t *testing.T) {
	limits := client.Limits{Size: 2, Idle: 1}
	_, pool := newPool(t, limits, nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(moonprom.NewPoolCollector(pool, "db"))
	const (
		maxLive = `moonpool_pool_max_live{pool=db}`
		maxIdle = `moonpool_pool_max_idle{pool=db}`
		minIdle = `moonpool_pool_min_idle{pool=db}`
	)
	for i, step := range []struct {
		size, idle, minIdle  int
		wantMax, wantMaxIdle float64 // 0: left out
		wantMinIdle          float64
	}{
		{2, 1, 0, 2, 1, 0},
		{5, 4, 2, 5, 4, 2},
		{0, 0, 1, 0, 0, 1},
		{3, 2, 3, 3, 2, 2},
	} {
		limits.Size, limits.Idle, limits.MinIdle = step.size, step.idle, step.minIdle
		if err := pool.SetLimits(limits); err != nil {
			t.Fatal(err)
		}
		got := scrape(t, reg)
		for _, m := range []struct {
			name string
			want float64
			opt  bool // left out at 0
		}{
			{maxLive, step.wantMax, true},
			{maxIdle, step.wantMaxIdle, true},
			{minIdle, step.wantMinIdle, false},
		} {
			v, ok := got[m.name]
			switch {
			case m.opt && m.want == 0:
				if ok {
					t.Errorf("step %d: after SetLimits(%+v): %s %v, want it left out", i, limits, m.name, v)
				}
			case !ok || v != m.want:
				t.Errorf("step %d: after SetLimits(%+v): %s %v (reported %v), want %v", i, limits, m.name, v, ok, m.want)
			}
		}
	}
}

// Each way a pool lets a resource go is counted under its own reason, and
// the reasons add up to Stats.Closes at every step. So are Gets, Resets
// and leaks.
func TestPoolCollectorClosesByReason(t *testing.T) {
	const (
		bad   = 1 // fails Check
		spent = 2 // Reuse refuses it
	)
	// Every timer is an hour late, so a Get finds a resource past Keep
	// before the eviction timer does.
	clock := vclock.NewVirtual(vclock.WithLateness(time.Hour))
	eng := client.NewEngine(client.WithClock(clock), engine.WithLogger(slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { eng.Shutdown(context.Background()) })
	limits := client.Limits{Size: 3, Idle: 1, Keep: time.Minute, MinIdle: 0}
	pool, err := client.NewPool(eng, client.PoolConfig[*int]{
		Open:      func(context.Context) (*int, error) { return new(int), nil },
		Limits:    limits,
		Ward:      client.Ward{Backoff: client.DefaultBackoff}, // a ward makes every Get read the clock
		Check:     func(_ context.Context, c *int) error { return map[bool]error{true: errors.New("gone")}[*c == bad] },
		Reuse:     func(c *int) bool { return *c != spent },
		LeakAfter: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(moonprom.NewPoolCollector(pool, "db"))
	get := func() *int {
		t.Helper()
		c, err := pool.Get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	reasons := []string{"stale", "evicted", "surplus", "broken", "unreused", "check_failed", "outdated", "shutdown"}
	steps := []struct {
		what string
		do   func()
		want map[string]float64 // by reason, and other metrics by name
	}{
		{"stale: idle past Keep when a Get comes", func() {
			pool.Put(get())
			clock.Advance(2 * time.Minute)
			pool.Put(get())
		}, map[string]float64{"stale": 1, "gets": 2, "empty": 2}},
		{"evicted: idle past Keep when the timer fires", func() {
			clock.Advance(2 * time.Hour)
			waitFor(t, "the eviction", func() bool { return pool.Stats().Evicted == 1 })
		}, map[string]float64{"stale": 1, "evicted": 1}},
		{"broken", func() { pool.Discard(get()) }, map[string]float64{"broken": 1, "gets": 3}},
		{"unreused", func() {
			c := get()
			*c = spent
			pool.Put(c)
		}, map[string]float64{"unreused": 1}},
		{"surplus: past the idle limit", func() {
			a, b := get(), get()
			pool.Put(a)
			pool.Put(b)
		}, map[string]float64{"surplus": 1, "gets": 6}},
		{"check_failed", func() {
			c := get()
			*c = bad
			pool.Put(c)
			pool.Put(get()) // the idle one fails its check, and the Get asks again
		}, map[string]float64{"check_failed": 1, "gets": 9}},
		{"outdated", func() {
			if err := pool.Reset(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the reset's close", func() bool { return pool.Stats().Outdated == 1 })
		}, map[string]float64{"outdated": 1, "resets": 1}},
		{"leaked", func() {
			c := get()
			clock.Advance(2 * time.Hour)
			waitFor(t, "the leak report", func() bool { return pool.Stats().Leaked == 1 })
			pool.Put(c)
		}, map[string]float64{"leaked": 1}},
		{"shutdown", func() {
			if err := pool.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
		}, map[string]float64{"shutdown": 1, "stale": 1, "evicted": 1, "broken": 1, "unreused": 1, "surplus": 1, "check_failed": 1, "outdated": 1}},
	}
	for i, s := range steps {
		s.do()
		got := scrape(t, reg)
		var sum float64
		for _, r := range reasons {
			v := got["moonpool_pool_closed_total{pool=db,reason="+r+"}"]
			sum += v
			if want, ok := s.want[r]; ok && v != want {
				t.Errorf("step %d (%s): closed %s %v, want %v", i, s.what, r, v, want)
			}
		}
		if closes := float64(pool.Stats().Closes); sum != closes {
			t.Errorf("step %d (%s): the reasons add up to %v, Stats.Closes is %v", i, s.what, sum, closes)
		}
		for key, name := range map[string]string{"gets": "gets_total", "empty": "empty_gets_total", "resets": "resets_total", "leaked": "leaked_total"} {
			if want, ok := s.want[key]; ok {
				if v := got["moonpool_pool_"+name+"{pool=db}"]; v != want {
					t.Errorf("step %d (%s): %s %v, want %v", i, s.what, name, v, want)
				}
			}
		}
	}
}
