// Package pgpool is an example: a pool of PostgreSQL connections
// (*pgx.Conn, from github.com/jackc/pgx/v5) on moonpool's client.Pool,
// written the way a server author would write it. It is also the moonpool
// side of the bench's Postgres suite.
//
// Open dials with pgx.ConnectConfig, Close closes, and a connection found
// broken after use (closed by an error, still busy, or left inside a
// transaction) is discarded instead of put back, so the pool makes a new
// one. A ward stands in front of the database, so that when it restarts
// the pool tries one connection at a time instead of every caller dialling
// at once. WithFleet shares that ward with the pool's other replicas, so a
// restart costs the database one probe at a time for the whole fleet.
//
//	eng := client.NewEngine()
//	defer eng.Shutdown(ctx)
//	cfg, err := pgx.ParseConfig("host=db user=app dbname=app")
//	...
//	db, err := pgpool.New(eng, cfg, 10)
//	...
//	err = db.Do(ctx, func(c *pgx.Conn) error {
//		return c.QueryRow(ctx, "SELECT name FROM users WHERE id = $1", id).Scan(&name)
//	})
package pgpool

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moonpool-go/moonpool/client"
)

// Pool lends PostgreSQL connections. Build it with New; the zero Pool is
// not usable. It is safe for concurrent use.
type Pool struct {
	conns *client.Pool[*pgx.Conn]
}

// DialTimeout bounds one connection attempt when the pgx.ConnConfig given
// to New sets no ConnectTimeout: the pool's Open has no deadline of its own
// (a caller giving up does not cancel a dial already under way), so without
// one a dial to a host that never answers would hold its room forever.
const DialTimeout = 5 * time.Second

// closeTimeout bounds the goodbye to the server when a connection closes.
const closeTimeout = 5 * time.Second

// New starts a pool on eng of at most size connections to the database
// cfg names; size 0 or less means client.DefaultLimits' ten. cfg must come
// from pgx.ParseConfig; New copies it, and sets DialTimeout on the copy if
// cfg has no ConnectTimeout. The pool keeps up to size idle, retires one
// idle for thirty minutes, and dials nothing until the first Do. It fails
// if cfg is nil or eng refuses the pool (nil, or shut down).
//
// The ward: opens are spaced to twice size a second in bursts of size, so
// a pool that lost every connection may replace them all at once but a
// storm of dials is turned into a queue; after a failed dial the pool
// holds further dials back (client.DefaultBackoff: 100 ms doubling to 1 s,
// then one probe at a time); and a database that keeps refusing has a
// share of dials refused before they are tried (client.DefaultBreaker).
// WithFleet shares that ward with the same pool in other replicas.
func New(eng *client.Engine, cfg *pgx.ConnConfig, size int, opts ...Option) (*Pool, error) {
	if cfg == nil {
		return nil, errors.New("pgpool: nil pgx.ConnConfig")
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	cfg = cfg.Copy()
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DialTimeout
	}
	limits := client.DefaultLimits
	if size > 0 {
		limits.Size, limits.Idle = size, size
	}
	conns, err := client.NewPool(eng, client.PoolConfig[*pgx.Conn]{
		Open: func(ctx context.Context) (*pgx.Conn, error) {
			return pgx.ConnectConfig(ctx, cfg)
		},
		Close: func(c *pgx.Conn) error {
			ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
			defer cancel()
			return c.Close(ctx)
		},
		Limits: limits,
		Ward: client.Ward{
			Bucket:  client.Rate{PerSecond: 2 * float64(limits.Size), Burst: float64(limits.Size)},
			Backoff: client.DefaultBackoff,
			Breaker: client.DefaultBreaker,
		},
		Fleet: o.fleet,
	})
	if err != nil {
		return nil, err
	}
	return &Pool{conns: conns}, nil
}

// Option changes how New builds a Pool.
type Option func(*options)

type options struct {
	fleet client.Fleet
}

// WithFleet shares the pool's ward with the same pool in other replicas
// of the service, through f (see client.Fleet; moonredis.NewFleet builds
// one on Redis). When dials fail in several replicas at once, the fleet
// holds every replica's dials and one replica at a time probes the
// database. When the probe works, every replica hears of it within
// milliseconds, so a restart costs the database one probe an interval, not
// one a replica. A nil f is no fleet. The pool leaves the fleet at Close;
// closing f is the caller's.
func WithFleet(f client.Fleet) Option {
	return func(o *options) { o.fleet = f }
}

// Do lends f a connection and takes it back when f returns, returning f's
// error. It blocks until a connection is there (idle, newly dialled, or
// handed back by another caller) or ctx is done, and returns the pool's
// error without calling f if none could be had: ctx's error, an
// *client.OpenError when the dial failed, or one matching client.ErrShed
// when the ward refused to dial. ctx bounds only the wait; f should pass it
// (or its own) to the queries it runs.
//
// f must not keep c after it returns. A connection f leaves closed (pgx
// closes one on a network error, or when the server ends the session),
// busy, or inside a transaction is discarded, so the next caller gets
// another; there is no other check of connections, so an idle one the
// server dropped is found out by the first query on it, which fails.
func (p *Pool) Do(ctx context.Context, f func(c *pgx.Conn) error) error {
	c, err := p.conns.Get(ctx)
	if err != nil {
		return err
	}
	ferr := f(c)
	if reusable(c) {
		_ = p.conns.Put(c) // fails only if c was not lent, or Close failed
	} else {
		_ = p.conns.Discard(c)
	}
	return ferr
}

// reusable says whether c can serve the next caller as it is: open, not
// in the middle of a query, and outside any transaction (the same test
// pgxpool's Release makes).
func reusable(c *pgx.Conn) bool {
	pc := c.PgConn()
	return !pc.IsClosed() && !pc.IsBusy() && pc.TxStatus() == 'I'
}

// Stats is a snapshot of the pool's books: see client.Stats.
func (p *Pool) Stats() client.Stats { return p.conns.Stats() }

// Close shuts the pool as client.Pool.Close does: from its start Do
// returns client.ErrClosed, idle connections are closed at once, and Close
// waits, within ctx, for the lent ones to come back and closes them too.
func (p *Pool) Close(ctx context.Context) error { return p.conns.Close(ctx) }
