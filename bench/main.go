// Command bench measures moonpool under contention, side by side with what
// a Go server author would otherwise pick: jackc/puddle and a buffered
// channel for pools, x/time/rate for rate limits, x/sync/semaphore for a
// concurrency gate, sony/gobreaker for a breaker, a map of rate limiters
// for a keyed limit, and failsafe-go's adaptivelimiter for an adaptive
// concurrency limit; a keyed limit kept in a real redis-server
// (moonredis) against go-redis/redis_rate; and, on request, real
// PostgreSQL connections against pgxpool and database/sql.
//
// Every pair runs in one process, its sides alternating in short slices
// round after round, so a machine that slows down slows both alike; each
// row reports ns/op (the median round), allocs/op, the p50 and p99 of one
// call, and the ratio ours/theirs measured in the same run.
//
// Usage:
//
//	go run ./bench            # about five minutes on 2 cores
//	go run ./bench -quick     # a few seconds
//	go run ./bench -full      # longer slices, more rounds
//	go run ./bench -out DIR   # also write DIR/results.md and an SVG per pair
//	go run ./bench -noise     # with GOMAXPROCS goroutines burning CPU alongside
//	go run ./bench -only Postgres   # a real PostgreSQL: about two minutes
//	go run ./bench -only Redis      # a real redis-server: about a minute
//	go run ./bench -only Fleet      # fleets of replicas through an outage: about a minute
//	go run ./bench -only Retry      # retry budgets and hedging: about twenty seconds
//	go run ./bench -only Adaptive   # adaptive limits through load and capacity changes: about a minute and a half
//
// The Postgres suite is not in the default run: it takes longer than all
// the others together, and needs PostgreSQL's server binaries (initdb,
// pg_ctl, postgres; Debian's postgresql package), from which it starts a
// throwaway cluster of its own. Without them it says so and is skipped.
// The Redis suite is in the default run when redis-server is on PATH
// (Debian's redis-server package); it starts one of its own on a free
// port. Without it, it says so in one line and is skipped.
// The Fleet suite is not in the default run either: it takes about a
// minute, most of it waiting out outages. It starts a redis-server as the
// Redis suite does, and without one it says so in one line and is skipped.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/pgtest"
	"github.com/moonpool-go/moonpool/internal/redistest"
)

// config is one way of running the whole suite.
type config struct {
	name           string
	callers        []int // for Pool, Rate and Gate
	breakerCallers []int
	keyedCallers   []int
	plan           plan
	attempts       int // per slice, for the Breaker
	keys           int // per slice, for Keyed
	keyedRounds    int // a slice of a million keys takes a second or two
	noise          bool
	pg             pgConfig
	redis          redisConfig
	fleet          fleetConfig
}

// pgConfig is how the Postgres suite runs.
type pgConfig struct {
	callers []int
	sizes   []int // the pools' most connections
	plan    plan  // a request takes tens of µs to ms, not ns: longer slices
	restart restartPlan
}

var configs = map[string]config{
	"quick": {
		name:           "quick",
		callers:        []int{1, 8, 64},
		breakerCallers: []int{1},
		keyedCallers:   []int{1},
		plan:           plan{rounds: 3, slice: 15 * time.Millisecond, samples: 6000},
		attempts:       2_000,
		keys:           100_000,
		keyedRounds:    1,
		pg: pgConfig{
			callers: []int{8, 64},
			sizes:   []int{10},
			plan:    plan{rounds: 3, slice: 100 * time.Millisecond, samples: 20_000},
			restart: restartPlan{rounds: 1, rate: 1000, size: 10, timeout: time.Second, before: 500 * time.Millisecond, after: 2 * time.Second},
		},
		redis: redisConfig{callers: []int{1, 64}, keys: []int{1, 10_000}, ops: 3000, plan: plan{rounds: 3, samples: 10_000}},
		fleet: fleetConfig{replicas: []int{1, 10}, callers: 2, every: 20 * time.Millisecond, timeout: 250 * time.Millisecond,
			warm: 300 * time.Millisecond, dead: 1500 * time.Millisecond, jitter: time.Second, settle: 500 * time.Millisecond, after: 1200 * time.Millisecond,
			rounds: 1, faultReplicas: 10, fault: 500 * time.Millisecond, healthy: []int{1}, healthyRounds: 7},
	},
	"default": {
		name:           "default",
		callers:        []int{1, 8, 64, 512},
		breakerCallers: []int{1, 8},
		keyedCallers:   []int{1, 8},
		plan:           plan{rounds: 7, slice: 80 * time.Millisecond, samples: 40_000},
		attempts:       10_000,
		keys:           1_000_000,
		keyedRounds:    3,
		pg: pgConfig{
			callers: []int{8, 64, 512},
			sizes:   []int{10, 50},
			plan:    plan{rounds: 5, slice: 250 * time.Millisecond, samples: 50_000},
			restart: restartPlan{rounds: 3, rate: 1000, size: 10, timeout: time.Second, before: time.Second, after: 3 * time.Second},
		},
		redis: redisConfig{callers: []int{1, 8, 64, 512}, keys: []int{1, 10_000}, ops: 20_000, plan: plan{rounds: 5, samples: 20_000}},
		fleet: fleetConfig{replicas: []int{1, 10, 50}, callers: 2, every: 20 * time.Millisecond, timeout: 250 * time.Millisecond,
			warm: 300 * time.Millisecond, dead: 2 * time.Second, jitter: time.Second, settle: 500 * time.Millisecond, after: 1500 * time.Millisecond,
			rounds: 1, faultReplicas: 10, fault: time.Second, healthy: []int{1, 8}, healthyRounds: 15},
	},
	"full": {
		name:           "full",
		callers:        []int{1, 8, 64, 512},
		breakerCallers: []int{1, 8, 64},
		keyedCallers:   []int{1, 8},
		plan:           plan{rounds: 15, slice: 250 * time.Millisecond, samples: 200_000},
		attempts:       100_000,
		keys:           1_000_000,
		keyedRounds:    5,
		pg: pgConfig{
			callers: []int{8, 64, 512},
			sizes:   []int{10, 50},
			plan:    plan{rounds: 9, slice: 500 * time.Millisecond, samples: 200_000},
			restart: restartPlan{rounds: 5, rate: 1000, size: 10, timeout: time.Second, before: time.Second, after: 4 * time.Second},
		},
		redis: redisConfig{callers: []int{1, 8, 64, 512}, keys: []int{1, 10_000}, ops: 50_000, plan: plan{rounds: 9, samples: 100_000}},
		fleet: fleetConfig{replicas: []int{1, 10, 50}, callers: 2, every: 20 * time.Millisecond, timeout: 250 * time.Millisecond,
			warm: 500 * time.Millisecond, dead: 3 * time.Second, jitter: time.Second, settle: 500 * time.Millisecond, after: 2 * time.Second,
			rounds: 3, faultReplicas: 50, fault: 2 * time.Second, healthy: []int{1, 8, 64}, healthyRounds: 25},
	},
	// smoke runs every code path in a blink; the tests use it.
	"smoke": {
		name:           "smoke",
		callers:        []int{1, 8, 64},
		breakerCallers: []int{1, 2},
		keyedCallers:   []int{1, 2},
		plan:           plan{rounds: 2, slice: time.Millisecond, samples: 200},
		attempts:       50,
		keys:           500,
		keyedRounds:    1,
		pg: pgConfig{
			callers: []int{8},
			sizes:   []int{4},
			plan:    plan{rounds: 1, slice: 20 * time.Millisecond, samples: 1000},
			restart: restartPlan{rounds: 1, rate: 200, size: 4, timeout: time.Second, before: 200 * time.Millisecond, after: time.Second},
		},
		redis: redisConfig{callers: []int{1, 64}, keys: []int{1, 100}, ops: 256, plan: plan{rounds: 1, samples: 200}},
		fleet: fleetConfig{replicas: []int{1, 3}, callers: 1, every: 20 * time.Millisecond, timeout: 100 * time.Millisecond,
			warm: 50 * time.Millisecond, dead: 200 * time.Millisecond, jitter: 100 * time.Millisecond, settle: 50 * time.Millisecond, after: 200 * time.Millisecond,
			rounds: 1, faultReplicas: 3, fault: 100 * time.Millisecond, healthy: []int{1, 2}, healthyRounds: 2},
	},
}

// suite is one group of rows sharing an engine.
type suite struct {
	name string
	rows func(eng *engine.Engine, cfg config) []row
	// serve, for a suite that needs a server, is used instead of rows: it
	// starts the server, and returns the rows and how to stop it. An error
	// matching pgtest.ErrNoServer skips the suite with one line.
	serve func(eng *engine.Engine, cfg config) ([]row, func(), error)
	// slow suites are left out of a run that names none; -only picks them.
	slow bool
}

var suites = []suite{
	{name: "Pool", rows: poolRows},
	{name: "Rate", rows: rateRows},
	{name: "Gate", rows: gateRows},
	{name: "Breaker", rows: breakerRows},
	{name: "Core", rows: func(_ *engine.Engine, cfg config) []row { return coreRows(cfg) }},
	{name: "Keyed", rows: keyedRows},
	{name: "Postgres", serve: postgresSuite, slow: true},
	{name: "Redis", serve: redisSuite},
	{name: "Fleet", serve: fleetSuite, slow: true},
	{name: "Retry", rows: retryRows},
	{name: "Adaptive", rows: adaptiveSuiteRows},
}

func main() {
	quick := flag.Bool("quick", false, "a few seconds: fewer callers, rounds and keys")
	full := flag.Bool("full", false, "the long run: longer slices, more rounds and samples")
	out := flag.String("out", "", "also write results.md and one SVG per pair into this directory")
	only := flag.String("only", "", "comma-separated suites to run (Pool,Rate,Gate,Breaker,Core,Keyed,Postgres,Redis,Fleet,Retry,Adaptive); all but Postgres and Fleet if empty")
	noise := flag.Bool("noise", false, "a noisy neighbour: GOMAXPROCS goroutines burning CPU beside the benchmark")
	flag.Parse()
	stopOnInterrupt()
	name := "default"
	switch {
	case *quick && *full:
		fmt.Fprintln(os.Stderr, "bench: -quick and -full together make no sense")
		os.Exit(2)
	case *quick:
		name = "quick"
	case *full:
		name = "full"
	}
	cfg := configs[name]
	cfg.noise = *noise
	if err := run(cfg, *only, *out, os.Stdout, os.Stderr, isTerminal(os.Stderr)); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// warnTo is where warn writes; run points it at its stderr.
var warnTo io.Writer = os.Stderr

// warn reports something that went wrong without stopping the run.
func warn(format string, args ...any) {
	fmt.Fprintf(warnTo, "\nbench: "+format+"\n", args...)
}

// run measures every suite picked by only, prints the table to stdout
// and, when out is not empty, writes the Markdown and the plots there.
func run(cfg config, only, out string, stdout, stderr io.Writer, tty bool) error {
	warnTo = stderr
	picked, err := pick(only)
	if err != nil {
		return err
	}
	m := describe(cfg)
	fmt.Fprintln(stderr, m.line())
	if cfg.noise {
		defer burn(runtime.GOMAXPROCS(0))()
	}

	// The progress line: rewritten in place on a terminal, one line per
	// row and level elsewhere.
	total := 0
	var rowsOf [][]row
	var engines []*engine.Engine
	stops := make([]func(), len(picked))
	defer func() {
		for _, stop := range stops {
			if stop != nil {
				stop()
			}
		}
	}()
	for i, s := range picked {
		eng := engine.New()
		var rs []row
		if s.serve != nil {
			rs, stops[i], err = s.serve(eng, cfg)
			switch {
			case errors.Is(err, pgtest.ErrNoServer), errors.Is(err, redistest.ErrNoServer):
				fmt.Fprintf(stderr, "bench: %s skipped: %v\n", s.name, err)
			case err != nil:
				for _, e := range append(engines, eng) {
					_ = e.Shutdown(context.Background())
				}
				return fmt.Errorf("%s: %w", s.name, err)
			}
		} else {
			rs = s.rows(eng, cfg)
		}
		engines = append(engines, eng)
		rowsOf = append(rowsOf, rs)
		for _, r := range rs {
			total += max(len(r.callers), 1)
		}
	}
	start := time.Now()
	done := 0
	last := ""
	say := func(what string) {
		head := fmt.Sprintf("[%d/%d %4.0fs] ", done+1, total, time.Since(start).Seconds())
		if tty {
			fmt.Fprintf(stderr, "\r\033[K%s%s", head, what)
			return
		}
		// Off a terminal, one line per level: the text up to "round".
		key, _, _ := strings.Cut(what, " round ")
		key = strings.TrimSuffix(key, " warm-up")
		if cut := strings.LastIndex(key, " "); cut > 0 {
			key = key[:cut] // drop the side's name
		}
		if key != last {
			fmt.Fprintf(stderr, "%s%s\n", head, key)
			last = key
		}
	}

	var results []result
	var failed error
	for i := range picked {
		for _, r := range rowsOf[i] {
			if failed != nil {
				break
			}
			res, err := measure(r, cfg.plan, say, func() { done++ })
			if err != nil {
				failed = err
				break
			}
			results = append(results, res)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := engines[i].Shutdown(ctx); err != nil {
			warn("engine shutdown: %v", err)
		}
		cancel()
		if stops[i] != nil {
			stops[i]()
			stops[i] = nil
		}
	}
	if tty {
		fmt.Fprint(stderr, "\r\033[K")
	}
	fmt.Fprintf(stderr, "done in %.1fs\n", time.Since(start).Seconds())
	if failed != nil {
		return failed
	}

	checks := targets(results, cfg.noise)
	writeTable(stdout, m, results, checks)
	if out != "" {
		if err := writeOut(out, m, results, checks); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", out)
	}
	if n := errorCount(results); n > 0 {
		return fmt.Errorf("%d operations failed that should not have (see the note column)", n)
	}
	return nil
}

// pick is the suites named in only, in their usual order; for an empty
// only, every suite but the slow ones.
func pick(only string) ([]suite, error) {
	if only == "" {
		var picked []suite
		for _, s := range suites {
			if !s.slow {
				picked = append(picked, s)
			}
		}
		return picked, nil
	}
	var names []string
	for n := range strings.SplitSeq(only, ",") {
		names = append(names, strings.ToLower(strings.TrimSpace(n)))
	}
	var picked []suite
	for _, s := range suites {
		if slices.Contains(names, strings.ToLower(s.name)) {
			picked = append(picked, s)
		}
	}
	if len(picked) != len(names) {
		return nil, fmt.Errorf("-only %q: the suites are Pool, Rate, Gate, Breaker, Core, Keyed, Postgres, Redis, Fleet, Retry and Adaptive", only)
	}
	return picked, nil
}

// atInterrupt holds what must not outlive the process when it is
// interrupted: a database server the bench started.
var atInterrupt struct {
	sync.Mutex
	next int
	fs   map[int]func()
}

// onInterrupt has f run if the bench is interrupted (Ctrl-C, SIGTERM)
// before forget is called.
func onInterrupt(f func()) (forget func()) {
	atInterrupt.Lock()
	defer atInterrupt.Unlock()
	if atInterrupt.fs == nil {
		atInterrupt.fs = map[int]func(){}
	}
	id := atInterrupt.next
	atInterrupt.next++
	atInterrupt.fs[id] = f
	return func() {
		atInterrupt.Lock()
		defer atInterrupt.Unlock()
		delete(atInterrupt.fs, id)
	}
}

// stopOnInterrupt makes an interrupt run what onInterrupt holds, then
// exit. Only main calls it: a test's process is not ours to end.
func stopOnInterrupt() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		fmt.Fprintln(os.Stderr, "\nbench: interrupted")
		atInterrupt.Lock()
		for _, f := range atInterrupt.fs {
			f()
		}
		os.Exit(130)
	}()
}

func errorCount(results []result) int64 {
	var n int64
	for _, r := range results {
		for _, lv := range r.levels {
			for _, s := range lv.sides {
				n += s.errs
			}
		}
	}
	return n
}

// isTerminal is whether f is a terminal, where the progress line may
// rewrite itself.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// machine describes where and how a run was made.
type machine struct {
	cpu       string
	cores     int
	maxprocs  int
	goVersion string
	platform  string
	date      time.Time
	config    config
	clockCost float64
}

func describe(cfg config) machine {
	return machine{
		cpu:       cpuModel(),
		cores:     runtime.NumCPU(),
		maxprocs:  runtime.GOMAXPROCS(0),
		goVersion: runtime.Version(),
		platform:  runtime.GOOS + "/" + runtime.GOARCH,
		date:      time.Now(),
		config:    cfg,
		clockCost: clockCost(),
	}
}

func (m machine) line() string {
	name := m.config.name
	if m.config.noise {
		name += ", -noise"
	}
	return fmt.Sprintf("moonpool bench (%s): %s, %d cores, GOMAXPROCS=%d, %s %s, %s",
		name, m.cpu, m.cores, m.maxprocs, m.goVersion, m.platform, m.date.Format("2006-01-02 15:04 MST"))
}

// burn starts n goroutines that spin on the CPU until the returned stop is
// called: a noisy neighbour, so the goroutine running an actor (or holding
// a lock) is preempted now and then, which is where spinning designs show
// their tails.
func burn(n int) (stop func()) {
	var quit atomic.Bool
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			x := uint64(1)
			for !quit.Load() {
				for range 1 << 12 {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
			sink.Add(x)
		})
	}
	return func() {
		quit.Store(true)
		wg.Wait()
	}
}

// sink keeps the burners' arithmetic from being optimised away.
var sink atomic.Uint64

// cpuModel is the first "model name" in /proc/cpuinfo, where there is one.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
