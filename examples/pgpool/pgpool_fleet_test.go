package pgpool

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/internal/pgtest"
	"github.com/moonpool-go/moonpool/internal/redistest"
	"github.com/moonpool-go/moonpool/moonredis"
	"github.com/redis/go-redis/v9"
)

// The fleet test's replicas: each a pool of fleetSize on its own engine,
// queried by fleetSize callers without pause.
const (
	fleetReplicas = 10
	fleetSize     = 2
)

// fleetDown is how long the database refuses sessions after its restart,
// as a large one does while it recovers. pg_ctl restart alone ends the
// sessions for only about a tenth of a second here.
const fleetDown = time.Second

// fleetProbeEvery is the fleet's probe interval in the test: one probe a
// tenth of a second for the whole fleet, where a lone replica's backoff
// ends at one a second. At the default 50 ms the fleet dials about two
// thirds as much as ten lone replicas here. The gap grows with the
// number of replicas.
const fleetProbeEvery = 100 * time.Millisecond

// fleetBound is how soon after the database is back every replica with a
// fleet must have a query through: a few probe intervals, so a test
// binary sharing the machine with others still meets it.
const fleetBound = 500 * time.Millisecond

// fleetFinding is how long after the restart begins the replicas are
// still finding their sessions gone: each dials again at once, fleet or
// not, since nobody knows yet that the database is down. The dials are
// compared from then on.
const fleetFinding = 300 * time.Millisecond

// TestFleetRestart restarts a real PostgreSQL under the load of ten
// replicas, each a pool on its own engine, and keeps it refusing sessions
// for fleetDown. Without a fleet each replica backs off alone. With a
// moonredis fleet over one real redis-server, the replicas dial far less
// while the database is down, once they have found it down, and every
// replica has a query through within fleetBound of its return.
func TestFleetRestart(t *testing.T) {
	rsrv := redistest.New(t)
	srv := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	alone := restartReplicas(t, ctx, srv, nil)
	rdb := redis.NewClient(&redis.Options{Addr: rsrv.Addr()})
	t.Cleanup(func() { rdb.Close() }) // after the fleets close: they are built later
	fleet := restartReplicas(t, ctx, srv, rdb)
	if t.Failed() {
		return
	}
	t.Logf("alone: %d dials while the database was down, %d after the first %v; first success per replica after its return: %v", alone.all, alone.dials, fleetFinding, alone.firsts)
	t.Logf("fleet: %d dials while the database was down, %d after the first %v; first success per replica after its return: %v", fleet.all, fleet.dials, fleetFinding, fleet.firsts)

	if fleet.dials*2 > alone.dials {
		t.Errorf("while the database was down, after the first %v, the fleet's replicas dialled %d times, the lone replicas %d; want at most half", fleetFinding, fleet.dials, alone.dials)
	}
	if slowest := slices.Max(fleet.firsts); slowest > fleetBound {
		t.Errorf("with the fleet, a replica's first success came %v after the database was back; want within %v (all: %v)", slowest, fleetBound, fleet.firsts)
	}
}

// restartRun is what the replicas did through one restart.
type restartRun struct {
	all    int             // dials of every replica while the database was down
	dials  int             // those from fleetFinding after the restart began
	firsts []time.Duration // each replica's first success after the database was back
}

// restartReplicas runs fleetReplicas pools against srv, each on its own
// engine and, when rdb is not nil, with its own moonredis fleet on rdb.
// It restarts srv under their load, keeps it refusing sessions for
// fleetDown, and says what the replicas did. The pools and fleets are
// closed when it returns.
func restartReplicas(t *testing.T, ctx context.Context, srv *pgtest.Server, rdb *redis.Client) restartRun {
	t.Helper()
	name := fmt.Sprint("pgpool-", time.Now().UnixNano())
	var (
		mu    sync.Mutex
		dials []time.Time // when each replica dialled
	)
	dialer := &net.Dialer{KeepAlive: 5 * time.Minute}
	dbs := make([]*Pool, fleetReplicas)
	var closers []func()
	defer func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}()
	for i := range dbs {
		cfg, err := pgx.ParseConfig(srv.ConnString())
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["application_name"] = app
		cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			dials = append(dials, time.Now())
			mu.Unlock()
			return dialer.DialContext(ctx, network, addr)
		}
		eng := client.NewEngine()
		closers = append(closers, func() {
			if err := eng.Shutdown(context.Background()); err != nil {
				t.Errorf("engine shutdown: %v", err)
			}
		})
		var opts []Option
		if rdb != nil {
			f, err := moonredis.NewFleet(eng, moonredis.FleetConfig{Client: rdb, Name: name, Replica: fmt.Sprint("replica-", i), ProbeEvery: fleetProbeEvery})
			if err != nil {
				t.Fatal(err)
			}
			closers = append(closers, func() {
				if err := f.Close(context.Background()); err != nil {
					t.Errorf("fleet close: %v", err)
				}
			})
			opts = append(opts, WithFleet(f))
		}
		db, err := New(eng, cfg, fleetSize, opts...)
		if err != nil {
			t.Fatal(err)
		}
		closers = append(closers, func() {
			if err := db.Close(context.Background()); err != nil {
				t.Errorf("pool close: %v", err)
			}
		})
		dbs[i] = db
	}

	// Each replica's callers query without pause and record the first
	// success after the database is back.
	var (
		stop     atomic.Bool
		warm     atomic.Int64 // successes before the restart
		returned atomic.Int64 // time.Now().UnixNano() when the database was back; 0 before
		wg       sync.WaitGroup
		firstOK  = make([]atomic.Int64, fleetReplicas)
	)
	for i, db := range dbs {
		for range fleetSize {
			wg.Go(func() {
				for !stop.Load() {
					qctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
					err := db.Do(qctx, func(c *pgx.Conn) error {
						_, err := c.Exec(qctx, "SELECT pg_sleep(0.001)")
						return err
					})
					cancel()
					if err != nil {
						time.Sleep(2 * time.Millisecond) // a refusal is quick: do not spin on it
						continue
					}
					warm.Add(1)
					if back := returned.Load(); back != 0 {
						firstOK[i].CompareAndSwap(0, time.Now().UnixNano())
					}
				}
			})
		}
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for warm.Load() < 200 {
		if time.Now().After(deadline) {
			t.Fatalf("the replicas got only %d queries through before the restart", warm.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the fleet's replicas are live members by now

	// The database refuses new sessions from the restart until fleetDown
	// after it; the pools' sessions, open already, go on until the restart.
	if err := allowConnections(ctx, srv, false); err != nil {
		t.Fatal(err)
	}
	restart := time.Now()
	if err := srv.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	time.Sleep(fleetDown)
	if err := allowConnections(ctx, srv, true); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	returned.Store(back.UnixNano())
	var run restartRun
	mu.Lock()
	for _, at := range dials {
		if at.After(restart) && at.Before(back) {
			run.all++
			if at.Sub(restart) >= fleetFinding {
				run.dials++
			}
		}
	}
	mu.Unlock()

	// Wait for every replica's first success, within two seconds.
	for wait := back.Add(2 * time.Second); time.Now().Before(wait); time.Sleep(5 * time.Millisecond) {
		all := true
		for i := range firstOK {
			all = all && firstOK[i].Load() != 0
		}
		if all {
			break
		}
	}
	for i := range firstOK {
		ok := firstOK[i].Load()
		if ok == 0 {
			t.Errorf("replica %d had no query through within 2 s of the database's return (fleet %v)", i, rdb != nil)
			continue
		}
		run.firsts = append(run.firsts, time.Duration(ok-back.UnixNano()).Round(time.Millisecond))
	}
	return run
}

// allowConnections lets the pools' database, postgres, take new sessions
// or refuses them, from a session on template1.
func allowConnections(ctx context.Context, srv *pgtest.Server, allow bool) error {
	c, err := pgx.Connect(ctx, srv.ConnString()+" dbname=template1 application_name=pgpool-admin")
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, fmt.Sprintf("ALTER DATABASE postgres WITH ALLOW_CONNECTIONS %v", allow))
	return err
}
