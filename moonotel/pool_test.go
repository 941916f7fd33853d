package moonotel_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/moonotel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newPool is a pool of fresh *int on an engine with a virtual clock, both
// gone with the test.
func newPool(t testing.TB, limits client.Limits) (*vclock.Virtual, *client.Pool[*int]) {
	t.Helper()
	clock := vclock.NewVirtual()
	eng := client.NewEngine(client.WithClock(clock))
	t.Cleanup(func() { eng.Shutdown(context.Background()) })
	p, err := client.NewPool(eng, client.PoolConfig[*int]{
		Open:   func(context.Context) (*int, error) { return new(int), nil },
		Limits: limits,
	})
	if err != nil {
		t.Fatal(err)
	}
	return clock, p
}

// collect reads every point the reader holds as "name{attr=value,...}"
// mapped to its value.
func collect(t testing.TB, r sdkmetric.Reader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	point := func(name string, attrs attribute.Set, v float64) {
		var kv []string
		for _, a := range attrs.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.String())
		}
		got[name+"{"+strings.Join(kv, ",")+"}"] = v
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != moonotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, moonotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					point(m.Name, p.Attributes, float64(p.Value))
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					point(m.Name, p.Attributes, p.Value)
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return got
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

// A pool's life told through its instruments, step by step: loans, a
// caller in line, a wait of two seconds, a caller that gives up.
func TestObservePool(t *testing.T) {
	clock, pool := newPool(t, client.Limits{Size: 2, Idle: 1})
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	reg, err := moonotel.ObservePool(provider, pool, "db")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()

	const (
		idle     = "db.client.connection.count{db.client.connection.pool.name=db,db.client.connection.state=idle}"
		used     = "db.client.connection.count{db.client.connection.pool.name=db,db.client.connection.state=used}"
		pending  = "db.client.connection.pending_requests{db.client.connection.pool.name=db}"
		timeouts = "db.client.connection.timeouts{db.client.connection.pool.name=db}"
		maxLive  = "db.client.connection.max{db.client.connection.pool.name=db}"
		maxIdle  = "db.client.connection.idle.max{db.client.connection.pool.name=db}"
		waits    = "moonpool.pool.waits{db.client.connection.pool.name=db}"
		waitTime = "moonpool.pool.wait_time{db.client.connection.pool.name=db}"
		getTime  = "moonpool.pool.get_time{db.client.connection.pool.name=db}"
		gets     = "moonpool.pool.gets{db.client.connection.pool.name=db}"
	)
	ctx := t.Context()
	var a, b *int
	waiter := make(chan *int, 1)
	quitter := make(chan error, 1)
	cancelQuitter := func() {}
	steps := []struct {
		what string
		do   func()
		want map[string]float64
	}{
		{"fresh", func() {}, map[string]float64{idle: 0, used: 0, pending: 0, timeouts: 0, maxLive: 2, maxIdle: 1, waits: 0, waitTime: 0}},
		{"two lent", func() { a, _ = pool.Get(ctx); b, _ = pool.Get(ctx) }, map[string]float64{idle: 0, used: 2, pending: 0}},
		{"a third in line", func() {
			go func() { c, _ := pool.Get(ctx); waiter <- c }()
			waitFor(t, "the third Get to wait in line", func() bool { return pool.Stats().Waiting == 1 })
		}, map[string]float64{used: 2, pending: 1, waits: 0}},
		{"served after 2s", func() {
			clock.Advance(2 * time.Second)
			pool.Put(a)
			a = <-waiter
		}, map[string]float64{used: 2, pending: 0, waits: 1, waitTime: 2, getTime: 2, gets: 3}},
		{"a fourth gives up", func() {
			qctx, cancel := context.WithCancel(ctx)
			cancelQuitter = cancel
			go func() { _, err := pool.Get(qctx); quitter <- err }()
			waitFor(t, "the fourth Get to wait in line", func() bool { return pool.Stats().Waiting == 1 })
			cancelQuitter()
			if err := <-quitter; !errors.Is(err, context.Canceled) {
				t.Errorf("the Get that gave up: %v", err)
			}
		}, map[string]float64{pending: 0, timeouts: 1, waits: 1}},
		{"both back, one kept", func() { pool.Put(a); pool.Put(b) }, map[string]float64{idle: 1, used: 0}},
	}
	for i, s := range steps {
		s.do()
		got := collect(t, reader)
		for k, want := range s.want {
			if v, ok := got[k]; !ok || v != want {
				t.Errorf("step %d (%s): %s = %v (reported %v), want %v", i, s.what, k, v, ok, want)
			}
		}
		if len(got) != 22 {
			t.Errorf("step %d (%s): %d points, want 22: %v", i, s.what, len(got), got)
		}
	}
	cancelQuitter()
}

// Limits of zero (no limit) have no number to report, so their
// instruments are left out; and once unregistered, nothing is reported.
func TestObservePoolWithoutLimitsAndUnregistered(t *testing.T) {
	_, pool := newPool(t, client.Limits{})
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	reg, err := moonotel.ObservePool(provider, pool, "cache")
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, reader)
	for k := range got {
		if strings.Contains(k, ".max{") {
			t.Errorf("%s reported for a pool without limits", k)
		}
	}
	if len(got) != 20 {
		t.Errorf("%d points, want 20: %v", len(got), got)
	}
	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, reader); len(got) != 0 {
		t.Errorf("after Unregister: %v", got)
	}
}

// db.client.connection.max, .idle.max and .idle.min are the pool's limits
// as SetLimits left them, read at each collection. max and idle.max are
// left out while the pool has no such limit. idle.min is MinIdle as the
// pool reads it: no more than Idle.
func TestObservePoolFollowsSetLimits(t *testing.T) {
	limits := client.Limits{Size: 2, Idle: 1, MinIdle: 3}
	_, pool := newPool(t, limits)
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	reg, err := moonotel.ObservePool(provider, pool, "db")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	const (
		maxLive = "db.client.connection.max{db.client.connection.pool.name=db}"
		maxIdle = "db.client.connection.idle.max{db.client.connection.pool.name=db}"
		minIdle = "db.client.connection.idle.min{db.client.connection.pool.name=db}"
	)
	for i, step := range []struct {
		size, idle, minIdle  int
		wantMax, wantMaxIdle float64 // 0: left out
		wantMinIdle          float64
	}{
		{2, 1, 3, 2, 1, 1},
		{5, 4, 2, 5, 4, 2},
		{0, 0, 1, 0, 0, 1},
		{3, 2, 3, 3, 2, 2},
	} {
		limits.Size, limits.Idle, limits.MinIdle = step.size, step.idle, step.minIdle
		if err := pool.SetLimits(limits); err != nil {
			t.Fatal(err)
		}
		got := collect(t, reader)
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
func TestObservePoolClosesByReason(t *testing.T) {
	const (
		bad   = 1 // fails Check
		spent = 2 // Reuse refuses it
	)
	// Every timer is an hour late, so a Get finds a resource past Keep
	// before the eviction timer does.
	clock := vclock.NewVirtual(vclock.WithLateness(time.Hour))
	eng := client.NewEngine(client.WithClock(clock), engine.WithLogger(slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { eng.Shutdown(context.Background()) })
	limits := client.Limits{Size: 3, Idle: 1, Keep: time.Minute}
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
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	reg, err := moonotel.ObservePool(provider, pool, "db")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
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
		want map[string]float64 // by reason, and other instruments by name
	}{
		{"stale: idle past Keep when a Get comes", func() {
			pool.Put(get())
			clock.Advance(2 * time.Minute)
			pool.Put(get())
		}, map[string]float64{"stale": 1, "gets": 2, "empty_gets": 2}},
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
	const named = "{db.client.connection.pool.name=db}"
	for i, s := range steps {
		s.do()
		got := collect(t, reader)
		var sum float64
		for _, r := range reasons {
			v := got["moonpool.pool.closes{db.client.connection.pool.name=db,moonpool.pool.close.reason="+r+"}"]
			sum += v
			if want, ok := s.want[r]; ok && v != want {
				t.Errorf("step %d (%s): closes %s %v, want %v", i, s.what, r, v, want)
			}
		}
		if closes := float64(pool.Stats().Closes); sum != closes {
			t.Errorf("step %d (%s): the reasons add up to %v, Stats.Closes is %v", i, s.what, sum, closes)
		}
		for _, name := range []string{"gets", "empty_gets", "resets", "leaked"} {
			if want, ok := s.want[name]; ok {
				if v := got["moonpool.pool."+name+named]; v != want {
					t.Errorf("step %d (%s): %s %v, want %v", i, s.what, name, v, want)
				}
			}
		}
	}
}

func TestObservePoolRefusesNil(t *testing.T) {
	_, pool := newPool(t, client.Limits{})
	provider := sdkmetric.NewMeterProvider()
	defer provider.Shutdown(context.Background())
	var noProvider *sdkmetric.MeterProvider
	var noPool *client.Pool[*int]
	for _, c := range []struct {
		name     string
		provider metric.MeterProvider
		pool     moonotel.Pool
	}{
		{"nil provider", nil, pool},
		{"nil *MeterProvider", noProvider, pool},
		{"nil pool", provider, nil},
		{"nil *client.Pool", provider, noPool},
	} {
		if reg, err := moonotel.ObservePool(c.provider, c.pool, "x"); err == nil || reg != nil {
			t.Errorf("%s: %v, %v; want an error and no registration", c.name, reg, err)
		}
	}
}

// Two pools, told apart by their name.
func ExampleObservePool() {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())

	eng := client.NewEngine()
	defer eng.Shutdown(context.Background())
	open := func(context.Context) (*int, error) { return new(int), nil }
	users, _ := client.NewPool(eng, client.PoolConfig[*int]{Open: open, Limits: client.DefaultLimits})
	orders, _ := client.NewPool(eng, client.PoolConfig[*int]{Open: open, Limits: client.DefaultLimits})
	for name, pool := range map[string]*client.Pool[*int]{"users": users, "orders": orders} {
		reg, err := moonotel.ObservePool(provider, pool, name)
		if err != nil {
			panic(err)
		}
		defer reg.Unregister()
	}
	c, _ := users.Get(context.Background())
	defer users.Put(c)

	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	var lines []string
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "db.client.connection.count" {
			for _, p := range sum.DataPoints {
				name, _ := p.Attributes.Value("db.client.connection.pool.name")
				state, _ := p.Attributes.Value("db.client.connection.state")
				lines = append(lines, fmt.Sprintf("%s %s %d", name.String(), state.String(), p.Value))
			}
		}
	}
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// orders idle 0
	// orders used 0
	// users idle 0
	// users used 1
}
