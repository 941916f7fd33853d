package pgpool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/internal/pgtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// app names the pool's sessions in pg_stat_activity.
const app = "pgpool-test"

// TestAgainstPostgres runs the pool against a real server: queries
// succeed, a restart under load is survived (the sessions it ends are
// discarded and replaced), no session is leaked (the server counts as many
// of the pool's sessions as the pool holds idle), and Close ends them all.
func TestAgainstPostgres(t *testing.T) {
	srv := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := pgx.ParseConfig(srv.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = app
	eng := client.NewEngine()
	defer func() {
		if err := eng.Shutdown(context.Background()); err != nil {
			t.Errorf("engine shutdown: %v", err)
		}
	}()
	const size = 4
	db, err := New(eng, cfg, size)
	if err != nil {
		t.Fatal(err)
	}
	watch := newWatcher(t, srv)
	defer watch.close()

	// Queries succeed, each caller getting its own answers back.
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := range 25 {
				want := w*1000 + i
				var got int
				err := db.Do(ctx, func(c *pgx.Conn) error {
					return c.QueryRow(ctx, "SELECT $1::int", want).Scan(&got)
				})
				if err != nil || got != want {
					t.Errorf("caller %d query %d: got %d, %v; want %d", w, i, got, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if s := db.Stats(); s.Live != size || s.Idle != size {
		t.Errorf("after 16 callers on a pool of %d: live %d, idle %d; want %d each", size, s.Live, s.Idle, size)
	}
	watch.sessionsAre(ctx, db.Stats().Idle)

	// A restart in the middle of a steady load is survived: every caller
	// gets a query through after the server is back.
	restartUnderLoad(t, ctx, srv, db)
	if t.Failed() {
		return
	}
	if db.Stats().Broken == 0 {
		t.Error("no connection was discarded, yet the restart ended every session")
	}

	// Nothing leaked: after every connection the pool holds has been used
	// once (an idle one the restart ended is found out and replaced), the
	// server has exactly the sessions the pool holds idle.
	useEveryConnection(t, ctx, db, size)
	s := db.Stats()
	if s.Busy != 0 || s.Live != s.Idle {
		t.Errorf("with nothing lent: live %d, idle %d, busy %d", s.Live, s.Idle, s.Busy)
	}
	watch.sessionsAre(ctx, s.Idle)

	if err := db.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
	watch.sessionsAre(ctx, 0)
	if err := db.Do(ctx, func(*pgx.Conn) error { return nil }); err == nil {
		t.Error("Do on a closed pool succeeded")
	}
}

// restartUnderLoad restarts srv while eight callers query db without
// pause, and returns once every caller has had a query succeed after the
// restart finished.
func restartUnderLoad(t *testing.T, ctx context.Context, srv *pgtest.Server, db *Pool) {
	t.Helper()
	const callers = 8
	var (
		stop      atomic.Bool
		restarted atomic.Bool
		before    atomic.Int64 // successes before the restart
		failed    atomic.Int64
		wg        sync.WaitGroup
	)
	recovered := make(chan struct{}, callers) // one per caller, after the restart
	for range callers {
		wg.Go(func() {
			back := false
			for !stop.Load() {
				qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				after := restarted.Load()
				err := db.Do(qctx, func(c *pgx.Conn) error {
					_, err := c.Exec(qctx, "SELECT pg_sleep(0.001)")
					return err
				})
				cancel()
				switch {
				case err != nil:
					failed.Add(1)
				case !after:
					before.Add(1)
				case !back:
					back = true
					recovered <- struct{}{}
				}
			}
		})
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	for before.Load() < 50 && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond) // let the load settle before the restart
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	restarted.Store(true)
	for i := range callers {
		select {
		case <-recovered:
		case <-ctx.Done():
			t.Fatalf("%d of %d callers got no query through after the restart (%d failed queries): %v", callers-i, callers, failed.Load(), context.Cause(ctx))
		}
	}
	t.Logf("restart: %d queries failed; %d connections discarded, %d dials failed", failed.Load(), db.Stats().Broken, db.Stats().MakeFailures)
}

// useEveryConnection holds size connections at once, each of them shown
// alive by a ping (one that is not is discarded by Do, and another taken),
// then hands them all back.
func useEveryConnection(t *testing.T, ctx context.Context, db *Pool, size int) {
	t.Helper()
	var arrived sync.WaitGroup
	arrived.Add(size)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	var wg sync.WaitGroup
	for range size {
		wg.Go(func() {
			for ctx.Err() == nil {
				err := db.Do(ctx, func(c *pgx.Conn) error {
					if err := c.Ping(ctx); err != nil {
						return err
					}
					arrived.Done()
					<-all // hold it until every caller holds one
					return nil
				})
				if err == nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("could not hold %d live connections at once: %v", size, ctx.Err())
	}
}

// watcher counts the pool's sessions from a connection of its own.
type watcher struct {
	t    *testing.T
	srv  *pgtest.Server
	conn *pgx.Conn
}

func newWatcher(t *testing.T, srv *pgtest.Server) *watcher {
	return &watcher{t: t, srv: srv}
}

// sessions is how many sessions the server has for app, reconnecting the
// watcher's own after a restart ended it.
func (w *watcher) sessions(ctx context.Context) (int, error) {
	if w.conn == nil || w.conn.IsClosed() {
		c, err := pgx.Connect(ctx, w.srv.ConnString()+" application_name=pgpool-watcher")
		if err != nil {
			return 0, err
		}
		w.conn = c
	}
	var n int
	err := w.conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n)
	return n, err
}

// sessionsAre waits until the server counts want sessions for app. A
// session the pool closed ends on the server a moment later, hence the
// wait; ten seconds without the right count fails the test.
func (w *watcher) sessionsAre(ctx context.Context, want int) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var n int
	var err error
	for {
		if n, err = w.sessions(ctx); err == nil && n == want {
			return
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("%d sessions", n)
			}
			w.t.Errorf("the server should count %d sessions of the pool: %v", want, errors.Join(err, ctx.Err()))
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (w *watcher) close() {
	if w.conn != nil {
		w.conn.Close(context.Background())
	}
}
