package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/examples/pgpool"
	"github.com/moonpool-go/moonpool/internal/pgtest"
	"github.com/moonpool-go/moonpool/internal/redistest"
	"github.com/moonpool-go/moonpool/moonredis"
	"github.com/redis/go-redis/v9"
)

// The Postgres suite pools real connections to a real PostgreSQL, through
// the same driver (pgx) on every side: moonpool's (examples/pgpool, a
// client.Pool of *pgx.Conn with a ward), pgxpool (pgx's own pool, built on
// puddle), and database/sql over pgx's stdlib driver. Each side has the
// same most connections, and keeps as many idle, so none of them closes
// and reopens connections in the steady state. The suite starts its own
// throwaway cluster (internal/pgtest) and removes it at the end. The
// restart has a fourth side, "moonpool fleet": examples/pgpool sharing its
// ward through a moonredis Fleet over a throwaway redis-server
// (internal/redistest), left out with a note when there is none.

// query is one workload: what a request asks the database.
type query struct {
	name string
	sql  string
	scan bool // read one int back (SELECT 1), rather than Exec
}

var queries = []query{
	{name: "SELECT 1", sql: "SELECT 1", scan: true},
	// Holds the connection about a millisecond, as a short real query does.
	{name: "pg_sleep(0.001)", sql: "SELECT pg_sleep(0.001)"},
}

// pgOn runs q on a pgx connection.
func pgOn(ctx context.Context, c *pgx.Conn, q query) error {
	if q.scan {
		var n int
		return c.QueryRow(ctx, q.sql).Scan(&n)
	}
	_, err := c.Exec(ctx, q.sql)
	return err
}

// dbPool is one side's pool as the suite drives it: do runs one request
// (wait for a connection, query, hand it back), dials counts the
// connection attempts that reached the dialer.
type dbPool struct {
	do    func(ctx context.Context, q query) error
	dials *atomic.Int64
	close func()
}

// dbSide builds one side's pool of size connections. A side that cannot
// run here has a note saying why, and no build.
type dbSide struct {
	name  string
	ours  bool
	build func(size int) (dbPool, error)
	note  string
}

// pgFleetSide is the restart's name for examples/pgpool with a Fleet.
const pgFleetSide = "moonpool fleet"

// countingDial is a pgx DialFunc that counts its calls: every attempt to
// reach the database, refused or not.
func countingDial(n *atomic.Int64) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{KeepAlive: 5 * time.Minute} // pgx's own default dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		return d.DialContext(ctx, network, addr)
	}
}

// dbSides are the three pools, each dialling srv through its own counter.
func dbSides(eng *engine.Engine, srv *pgtest.Server) []dbSide {
	// One dial timeout for all: the example sets this one when none is set.
	connString := fmt.Sprintf("%s connect_timeout=%d", srv.ConnString(), int(pgpool.DialTimeout/time.Second))
	config := func(dials *atomic.Int64) (*pgx.ConnConfig, error) {
		cfg, err := pgx.ParseConfig(connString)
		if err != nil {
			return nil, err
		}
		cfg.DialFunc = countingDial(dials)
		return cfg, nil
	}
	return []dbSide{
		{name: "moonpool", ours: true, build: func(size int) (dbPool, error) {
			dials := new(atomic.Int64)
			cfg, err := config(dials)
			if err != nil {
				return dbPool{}, err
			}
			db, err := pgpool.New(eng, cfg, size)
			if err != nil {
				return dbPool{}, err
			}
			return dbPool{
				do: func(ctx context.Context, q query) error {
					return db.Do(ctx, func(c *pgx.Conn) error { return pgOn(ctx, c, q) })
				},
				dials: dials,
				close: func() { closeWithin(db.Close) },
			}, nil
		}},
		{name: "pgxpool", build: func(size int) (dbPool, error) {
			dials := new(atomic.Int64)
			cfg, err := pgxpool.ParseConfig(connString)
			if err != nil {
				return dbPool{}, err
			}
			cfg.ConnConfig.DialFunc = countingDial(dials)
			cfg.MaxConns = int32(size)
			p, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				return dbPool{}, err
			}
			return dbPool{
				do: func(ctx context.Context, q query) error {
					c, err := p.Acquire(ctx)
					if err != nil {
						return err
					}
					defer c.Release()
					return pgOn(ctx, c.Conn(), q)
				},
				dials: dials,
				close: p.Close,
			}, nil
		}},
		{name: "database/sql", build: func(size int) (dbPool, error) {
			dials := new(atomic.Int64)
			cfg, err := config(dials)
			if err != nil {
				return dbPool{}, err
			}
			db := stdlib.OpenDB(*cfg)
			db.SetMaxOpenConns(size)
			db.SetMaxIdleConns(size) // its default keeps two, and would reopen the rest
			return dbPool{
				do: func(ctx context.Context, q query) error {
					if q.scan {
						var n int
						return db.QueryRowContext(ctx, q.sql).Scan(&n)
					}
					_, err := db.ExecContext(ctx, q.sql)
					return err
				},
				dials: dials,
				close: func() {
					if err := db.Close(); err != nil {
						warn("database/sql close: %v", err)
					}
				},
			}, nil
		}},
	}
}

// startServer is how the suite gets its cluster; the tests share it.
var startServer = pgtest.Start

// fleetDBSide is examples/pgpool with a moonredis Fleet over the
// redis-server at addr, alone in its fleet: each pool it builds joins a
// fleet of its own name, so no round inherits another's state.
func fleetDBSide(eng *engine.Engine, srv *pgtest.Server, addr string) dbSide {
	connString := fmt.Sprintf("%s connect_timeout=%d", srv.ConnString(), int(pgpool.DialTimeout/time.Second))
	var rounds atomic.Int64
	return dbSide{name: pgFleetSide, build: func(size int) (dbPool, error) {
		dials := new(atomic.Int64)
		cfg, err := pgx.ParseConfig(connString)
		if err != nil {
			return dbPool{}, err
		}
		cfg.DialFunc = countingDial(dials)
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		name := fmt.Sprintf("bench-postgres-%d-%d", os.Getpid(), rounds.Add(1))
		fl, err := moonredis.NewFleet(eng, moonredis.FleetConfig{Client: rdb, Name: name})
		if err != nil {
			rdb.Close()
			return dbPool{}, err
		}
		db, err := pgpool.New(eng, cfg, size, pgpool.WithFleet(fl))
		if err != nil {
			closeWithin(fl.Close)
			rdb.Close()
			return dbPool{}, err
		}
		return dbPool{
			do: func(ctx context.Context, q query) error {
				return db.Do(ctx, func(c *pgx.Conn) error { return pgOn(ctx, c, q) })
			},
			dials: dials,
			close: func() {
				closeWithin(db.Close)
				closeWithin(fl.Close)
				if err := rdb.Close(); err != nil {
					warn("Postgres %s: closing the Redis client: %v", pgFleetSide, err)
				}
			},
		}, nil
	}}
}

// startFleetRedis starts the redis-server of the restart's fleet side. It
// returns the side, and a func that stops the server; without a
// redis-server the side has only a note.
func startFleetRedis(eng *engine.Engine, srv *pgtest.Server) (dbSide, func(), error) {
	dir, err := os.MkdirTemp("", "moonpool-pgfleet-")
	if err != nil {
		return dbSide{}, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := startRedis(ctx, dir)
	if err != nil {
		os.RemoveAll(dir)
		if errors.Is(err, redistest.ErrNoServer) {
			return dbSide{name: pgFleetSide, note: "skipped: " + err.Error()}, func() {}, nil
		}
		return dbSide{}, nil, err
	}
	return fleetDBSide(eng, srv, rs.Addr()), func() { rs.Stop(); os.RemoveAll(dir) }, nil
}

// postgresSuite starts the cluster and returns the suite's rows: each
// query at each pool size, at each level of callers, then the restart.
func postgresSuite(eng *engine.Engine, cfg config) ([]row, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := startServer(ctx)
	if err != nil {
		return nil, nil, err
	}
	fleet, stopRedis, err := startFleetRedis(eng, srv)
	if err != nil {
		_ = srv.Stop()
		return nil, nil, err
	}
	forget := onInterrupt(func() { _ = srv.Stop(); stopRedis() })
	stop := func() {
		forget()
		stopRedis()
		if err := srv.Stop(); err != nil {
			warn("stopping PostgreSQL: %v", err)
		}
	}
	sides := dbSides(eng, srv)
	var rows []row
	for _, q := range queries {
		for _, size := range cfg.pg.sizes {
			r := row{
				suite:   "Postgres",
				name:    fmt.Sprintf("%s size=%d", q.name, size),
				callers: cfg.pg.callers,
				batch:   1,
				every:   1,
				count:   countOpened,
				plan:    &cfg.pg.plan,
			}
			for _, s := range sides {
				r.sides = append(r.sides, side{name: s.name, ours: s.ours, build: func(int) (contender, error) {
					db, err := s.build(size)
					if err != nil {
						return contender{}, err
					}
					return db.contender(q, s.name), nil
				}})
			}
			rows = append(rows, r)
		}
	}
	rp := cfg.pg.restart
	rows = append(rows, row{
		suite: "Postgres",
		name:  fmt.Sprintf("restart, %s at %d/s, size=%d", restartQuery.name, rp.rate, rp.size),
		scenario: func(say progress) (result, error) {
			return restartRow(srv, append(slices.Clip(sides), fleet), rp, say)
		},
	})
	return rows, stop, nil
}

// contender runs q as the timed operation, with no deadline: a request
// fails only if the database or the pool fails it.
func (db dbPool) contender(q query, name string) contender {
	var errs atomic.Int64
	var once sync.Once
	ctx := context.Background()
	return contender{
		run: func(n int) {
			for range n {
				if err := db.do(ctx, q); err != nil {
					errs.Add(1)
					once.Do(func() { warn("Postgres %s: %s: %v", q.name, name, err) })
				}
			}
		},
		close: db.close,
		count: db.dials.Load,
		errs:  errs.Load,
	}
}

// restartPlan is the restart scenario: requests arrive at rate a second,
// each given timeout, on a pool of size; the server is restarted once the
// load has run for before, and the load goes on for after once the server
// is back. Each side runs it rounds times, in rotating order.
type restartPlan struct {
	rounds        int
	rate          int
	size          int
	timeout       time.Duration
	before, after time.Duration
}

// restartQuery is the restart's request.
var restartQuery = queries[0]

// restartRound is what one side did through one restart.
type restartRound struct {
	requests    int64         // arrived in all
	failed      int64         // failed, for any reason
	failedEarly int64         // of them, before the restart began: there should be none
	outage      time.Duration // how long pg_ctl restart took: sessions ended, shut down, started, accepting again
	lastFailure time.Duration // from the restart's start to the end of the last failed request; 0 if none
	slowest     time.Duration // the longest a request took that succeeded: what waiting out the restart cost
	recovered   bool          // no request failed in the last second of the run
	dialsDown   int64         // connection attempts while pg_ctl restart ran
	dialsAfter  int64         // connection attempts after it was back
	back        time.Duration // from the restart's start to the server's return, as a watcher saw it
	firstAfter  time.Duration // from the server's return to the end of the first request to succeed after it
	firstErr    string        // the first error after the restart began
	lastErr     string        // the last one
}

// restartSide is one side's rounds, and the medians the report shows.
type restartSide struct {
	side   string
	ours   bool
	note   string // why the side did not run, when it did not
	rounds []restartRound
}

func (s restartSide) median(f func(restartRound) float64) float64 {
	xs := make([]float64, len(s.rounds))
	for i, r := range s.rounds {
		xs[i] = f(r)
	}
	return median(xs)
}

func (s restartSide) failed() float64 {
	return s.median(func(r restartRound) float64 { return float64(r.failed) })
}

func (s restartSide) lastFailure() float64 {
	return s.median(func(r restartRound) float64 { return float64(r.lastFailure) })
}

// sinceBack is the last failure's time after the server was back (pg_ctl
// restart returned), negative when the errors stopped before: restarts
// take different times, so this is the pools' recovery compared fairly.
// pg_ctl looks for the server every 100 ms, so it is back up to that much
// before pg_ctl says so.
func (s restartSide) sinceBack() float64 {
	return s.median(func(r restartRound) float64 { return float64(r.lastFailure - r.outage) })
}

// firstAfter is the first success after the server's return, as a
// watcher of the suite's own saw it: how soon the pool found out.
func (s restartSide) firstAfter() float64 {
	return s.median(func(r restartRound) float64 { return float64(r.firstAfter) })
}

func (s restartSide) dialsDown() float64 {
	return s.median(func(r restartRound) float64 { return float64(r.dialsDown) })
}

// restartRow runs the restart scenario for every side, rounds times,
// rotating which side goes first.
func restartRow(srv *pgtest.Server, sides []dbSide, p restartPlan, say progress) (result, error) {
	out := make([]restartSide, len(sides))
	for i, s := range sides {
		out[i] = restartSide{side: s.name, ours: s.ours, note: s.note}
	}
	for round := range p.rounds {
		for j := range sides {
			i := (j + round) % len(sides)
			if sides[i].build == nil {
				continue
			}
			say(fmt.Sprintf("Postgres restart %s round %d/%d", sides[i].name, round+1, p.rounds))
			r, err := restartOnce(srv, sides[i], p)
			if err != nil {
				return result{}, fmt.Errorf("postgres restart, %s: %w", sides[i].name, err)
			}
			out[i].rounds = append(out[i].rounds, r)
		}
	}
	return result{restart: out}, nil
}

// restartOnce builds a side's pool, offers it a steady load, restarts the
// server in the middle of it, and tells what the pool made of it.
//
// The load is an open loop: requests arrive on schedule whether or not
// the earlier ones have finished, as a server's requests do, so a pool
// that fails fast does not get more requests to fail than one that makes
// them wait. A request fails when the pool or the query returns an error,
// including its timeout.
func restartOnce(srv *pgtest.Server, s dbSide, p restartPlan) (restartRound, error) {
	db, err := s.build(p.size)
	if err != nil {
		return restartRound{}, err
	}
	defer db.close()

	var (
		r        restartRound
		began    atomic.Int64 // mono() when the restart began; 0 before
		mu       sync.Mutex   // guards lastFail and r's errors
		lastFail int64        // mono() when the last failed request ended
		oks      []int64      // mono() when each request that succeeded after the restart began ended
		requests sync.WaitGroup
	)
	request := func() {
		ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
		defer cancel()
		start := mono()
		err := db.do(ctx, restartQuery)
		end := mono()
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			r.slowest = max(r.slowest, time.Duration(end-start))
			if began.Load() != 0 {
				oks = append(oks, end)
			}
			return
		}
		r.failed++
		if began.Load() == 0 {
			r.failedEarly++
			return
		}
		if r.firstErr == "" {
			r.firstErr = err.Error()
		}
		if end > lastFail {
			lastFail, r.lastErr = end, err.Error()
		}
	}

	// The pacer starts requests on schedule until stopped.
	stop := make(chan struct{})
	paced := make(chan int64)
	go func() {
		start := mono()
		var n int64
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				paced <- n
				return
			case <-tick.C:
			}
			due := (mono() - start) * int64(p.rate) / int64(time.Second)
			for ; n < due; n++ {
				requests.Go(request)
			}
		}
	}()

	time.Sleep(p.before)
	d0 := db.dials.Load()
	t0 := mono()
	began.Store(t0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	watched := make(chan int64, 1)
	go func() { watched <- watchReturn(ctx, srv) }()
	err = srv.Restart(ctx)
	t1 := mono()
	d1 := db.dials.Load()
	if err != nil {
		cancel()
		<-watched
		close(stop)
		<-paced
		requests.Wait()
		return r, err
	}
	var back int64
	select {
	case back = <-watched:
	case <-time.After(time.Second): // it never saw the server down
		cancel()
		back = <-watched
	}
	cancel()
	if back == 0 || back > t1 {
		back = t1 // the watcher never saw the server down: pg_ctl's word
	}
	time.Sleep(p.after)
	end := mono()
	close(stop)
	r.requests = <-paced
	requests.Wait()

	r.outage = time.Duration(t1 - t0)
	r.dialsDown = d1 - d0
	r.dialsAfter = db.dials.Load() - d1
	if lastFail > 0 {
		r.lastFailure = time.Duration(lastFail - t0)
	}
	r.back = time.Duration(back - t0)
	r.firstAfter = time.Duration(end - back) // no success at all: the whole run after the return
	for _, ok := range oks {
		if ok >= back {
			r.firstAfter = min(r.firstAfter, time.Duration(ok-back))
		}
	}
	// A failure that ended in the run's last second, while requests were
	// still arriving, means the pool had not recovered.
	r.recovered = lastFail < end-int64(time.Second)
	return r, nil
}

// watchReturn connects to srv every 2 ms from the restart's start, over a
// connection of its own that no side counts, and returns mono() when a
// connection works after one failed: the server's return. pg_ctl looks
// only every 100 ms. It returns 0 if ctx ends first.
func watchReturn(ctx context.Context, srv *pgtest.Server) int64 {
	down := false
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := pgx.Connect(cctx, srv.ConnString()+" application_name=bench-watcher")
		cancel()
		if err == nil {
			at := mono()
			c.Close(context.Background())
			if down {
				return at
			}
		} else {
			down = true
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Millisecond):
		}
	}
	return 0
}

// restartFacts are the columns of the restart table, for one side.
func restartFacts(s restartSide) []string {
	ms := func(v float64) string { return fmt.Sprintf("%.0f ms", v/1e6) }
	if len(s.rounds) == 0 {
		return []string{s.side, "", "", "", "", "", "", "", "", "", s.note}
	}
	outage := s.median(func(r restartRound) float64 { return float64(r.outage) })
	requests := s.median(func(r restartRound) float64 { return float64(r.requests) })
	dialsAfter := s.median(func(r restartRound) float64 { return float64(r.dialsAfter) })
	early := s.median(func(r restartRound) float64 { return float64(r.failedEarly) })
	note := ""
	if early > 0 {
		note = fmt.Sprintf("%.0f FAILED before the restart; ", early)
	}
	if unrecovered := slices.IndexFunc(s.rounds, func(r restartRound) bool { return !r.recovered }); unrecovered >= 0 {
		note += "still failing at the end of a round; "
	}
	// The errors of the median round by failures: the first, and the
	// last when it differs.
	if len(s.rounds) > 0 {
		byFailed := slices.Clone(s.rounds)
		slices.SortFunc(byFailed, func(a, b restartRound) int { return int(a.failed - b.failed) })
		r := byFailed[len(byFailed)/2]
		if r.firstErr != "" {
			note += "first error: " + shorten(r.firstErr, 90)
		}
		if r.lastErr != r.firstErr {
			note += "; last: " + shorten(r.lastErr, 90)
		}
	}
	return []string{
		s.side,
		fmt.Sprintf("%.0f", requests),
		fmt.Sprintf("%.0f", s.failed()),
		ms(s.median(func(r restartRound) float64 { return float64(r.slowest) })),
		ms(s.lastFailure()),
		ms(outage),
		ms(s.sinceBack()),
		ms(s.firstAfter()),
		fmt.Sprintf("%.0f", s.dialsDown()),
		fmt.Sprintf("%.0f", dialsAfter),
		note,
	}
}

// shorten keeps the last n bytes of an error's text, where the cause is
// (a refused dial, a server shutting down), marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return "…" + s
}

// ownTable is the table of a row that does not print the common columns:
// a Postgres row (requests a second, p999, connections opened) or the
// restart. The last cell of each line is the note.
func ownTable(r result) (head []string, body [][]string, ok bool) {
	switch {
	case r.restart != nil:
		head = []string{"side", "requests", "failed", "slowest success", "last failure", "restart took", "last failure after it", "first success after return", "dials during restart", "dials after", "note"}
		for _, s := range r.restart {
			body = append(body, restartFacts(s))
		}
		return head, body, true
	case r.row.count == countOpened:
		head = []string{"callers", "side", "req/s", "p50", "p99", "p999", "opened", "ours/theirs req/s", "ours/theirs p99", "note"}
		for _, lv := range r.levels {
			o := oursOf(lv)
			for i := range lv.sides {
				m := &lv.sides[i]
				cells := []string{"", m.side, fmt.Sprintf("%.0f", 1e9/m.ns), nsText(m.p50), nsText(m.p99), nsText(m.p999), fmt.Sprintf("%.0f", m.total), "", "", ""}
				if i == 0 {
					cells[0] = fmt.Sprint(lv.callers)
				}
				if !m.ours && o != nil {
					cells[7], cells[8] = times(m.ns/o.ns), times(o.p99/m.p99)
				}
				if m.errs > 0 {
					cells[9] = fmt.Sprintf("%d FAILED", m.errs)
				}
				body = append(body, cells)
			}
		}
		return head, body, true
	}
	return nil, nil, false
}

// pgTargets checks the Postgres rows of this run against the PostgreSQL
// targets; none when the suite did not run.
func pgTargets(results []result) []check {
	var cs []check
	for _, r := range results {
		if r.row.suite != "Postgres" {
			continue
		}
		if r.restart != nil {
			cs = append(cs, restartTargets(r.restart)...)
			continue
		}
		// Requests a second ours over pgxpool's: above 1 is faster.
		rate := func(o, t *measured) float64 { return t.ns / o.ns }
		tail := func(o, t *measured) float64 { return o.p99 / t.p99 }
		label := "Postgres " + r.row.name
		text, xs := pgRatios(r, func(c int) bool { return c >= 64 }, rate)
		cs = append(cs, check{group: "PostgreSQL", target: label + ": req/s at or above pgxpool's at 64 and 512 callers", measured: text, met: allOf(xs, func(x float64) bool { return x >= 1 }), known: len(xs) > 0})
		text, xs = pgRatios(r, func(c int) bool { return c >= 64 }, tail)
		cs = append(cs, check{group: "PostgreSQL", target: label + ": p99 at or below pgxpool's at 64 and 512 callers", measured: text, met: allOf(xs, func(x float64) bool { return x <= 1 }), known: len(xs) > 0})
		text, xs = pgRatios(r, func(c int) bool { return c == 8 }, rate)
		cs = append(cs, check{group: "PostgreSQL", target: label + ": req/s within 5% of pgxpool's at 8 callers", measured: text, met: allOf(xs, func(x float64) bool { return x >= 0.95 }), known: len(xs) > 0})
	}
	return cs
}

// pgRatios lists ratio(ours, pgxpool) at the levels want picks, as
// "64: 1.02×, 512: 0.97×", and the ratios themselves.
func pgRatios(r result, want func(int) bool, ratio func(o, t *measured) float64) (string, []float64) {
	var parts []string
	var xs []float64
	for _, lv := range r.levels {
		o, t := oursOf(lv), sideOf(lv, "pgxpool")
		if !want(lv.callers) || o == nil || t == nil {
			continue
		}
		x := ratio(o, t)
		xs = append(xs, x)
		parts = append(parts, fmt.Sprintf("%d: %s", lv.callers, times(x)))
	}
	return strings.Join(parts, ", "), xs
}

func allOf(xs []float64, ok func(float64) bool) bool {
	for _, x := range xs {
		if !ok(x) {
			return false
		}
	}
	return true
}

// restartTargets: no more failed requests than pgxpool, at most half its
// connection attempts while the server is down, and the errors over no
// later than pgxpool's, counted from when the server was back (medians
// over the rounds). The fleet side's first success after the server's
// return must come before pgxpool's.
func restartTargets(sides []restartSide) []check {
	var ours, theirs, fleet *restartSide
	for i := range sides {
		switch {
		case sides[i].ours:
			ours = &sides[i]
		case sides[i].side == "pgxpool":
			theirs = &sides[i]
		case sides[i].side == pgFleetSide:
			fleet = &sides[i]
		}
	}
	if ours == nil || theirs == nil {
		return nil
	}
	failed, down, last := ours.failed(), ours.dialsDown(), ours.sinceBack()
	tFailed, tDown, tLast := theirs.failed(), theirs.dialsDown(), theirs.sinceBack()
	first := check{group: "PostgreSQL", target: "Postgres restart: moonpool fleet's first success after the server's return before pgxpool's"}
	if fleet != nil && len(fleet.rounds) > 0 {
		f, t := fleet.firstAfter(), theirs.firstAfter()
		first.known, first.met = true, f < t
		first.measured = fmt.Sprintf("%.0f ms against %.0f ms", f/1e6, t/1e6)
	} else if fleet != nil {
		first.measured = fleet.note
	}
	return []check{
		{group: "PostgreSQL", target: "Postgres restart: no more failed requests than pgxpool", known: true, met: failed <= tFailed,
			measured: fmt.Sprintf("%.0f against %.0f", failed, tFailed)},
		{group: "PostgreSQL", target: "Postgres restart: at most half pgxpool's connection attempts during the restart", known: true, met: down <= tDown/2,
			measured: fmt.Sprintf("%.0f against %.0f (%s)", down, tDown, times(down/tDown))},
		{group: "PostgreSQL", target: "Postgres restart: errors over as soon as pgxpool's (last failure, from when the server was back)", known: true, met: last <= tLast,
			measured: fmt.Sprintf("%.0f ms against %.0f ms", last/1e6, tLast/1e6)},
		first,
	}
}

// pgPlanLine says how the Postgres suite ran, for the report's header;
// "" when it did not.
func pgPlanLine(m machine, results []result) string {
	if !slices.ContainsFunc(results, func(r result) bool { return r.row.suite == "Postgres" }) {
		return ""
	}
	pg := m.config.pg
	rp := pg.restart
	return fmt.Sprintf("Postgres: %d rounds of %v slices per side and level (at most %d latency samples per side and level), the server a throwaway cluster on the same machine; "+
		"restart: %s requests arriving at %d/s, each with a %v timeout, on pools of %d, the server restarted (pg_ctl restart -m fast) after %v of load and the load kept on for %v after it was back, %d rounds in rotating order, medians shown; "+
		"the moonpool fleet side shares its ward through a moonredis Fleet (its defaults) on a throwaway redis-server; the server's return is when a watcher's connection, tried every 2 ms, first works again",
		pg.plan.rounds, pg.plan.slice, pg.plan.samples, restartQuery.name, rp.rate, rp.timeout, rp.size, rp.before, rp.after, rp.rounds)
}
