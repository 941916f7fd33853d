package main

import (
	"context"
	"errors"
	"fmt"
	"html"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/puddle/v2"
	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/redistest"
	"github.com/moonpool-go/moonpool/moonredis"
	"github.com/moonpool-go/moonpool/policy"
	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
)

// The Fleet suite runs N replicas of one service in this process, each its
// own engine and pool, in front of one TCP backend on 127.0.0.1 that dies
// for a few seconds and then returns. Each replica's callers send requests
// at a steady rate: take a connection, send a byte, read it back, give the
// connection back. Four sides do it:
//
//   - the local ward: a client.Pool with the ward of the README (a bucket,
//     DefaultBackoff, DefaultBreaker), each replica on its own;
//   - the fleet ward: the same, joined to a moonredis.Fleet on a real
//     redis-server (the suite starts one);
//   - gobreaker: a gobreaker v2 CircuitBreaker per replica around each
//     request on a puddle pool;
//   - gobreaker distributed: gobreaker v2's DistributedCircuitBreaker over
//     the same redis-server, its SharedDataStore written here over go-redis.
//
// Both gobreakers trip after more than five failures in a row (their
// default) and stay open for a second (Timeout), the longest the ward's
// backoff holds makes (DefaultBackoff's Cap), so each side waits at most
// about as long to try a backend that came back.

// fleetConfig is how the Fleet suite runs.
type fleetConfig struct {
	replicas []int         // the fleet sizes of the outage
	callers  int           // callers per replica
	every    time.Duration // between two requests of one caller
	timeout  time.Duration // each request's deadline
	warm     time.Duration // healthy load before the backend dies
	dead     time.Duration // how long the backend is dead, at least
	// jitter lengthens each outage by a draw in [0, jitter), the same for
	// every side at a fleet size and round, so that no side's timers line
	// up with the return from one run to the next.
	jitter time.Duration
	settle time.Duration // the outage's first part, whose dials are counted apart
	after  time.Duration // the load kept on after the backend is back
	rounds int           // outages per side and fleet size, in rotating order
	// faultReplicas is the fleet of the local-fault row: one replica's
	// dials fail for fault, after a healthy span as long.
	faultReplicas int
	fault         time.Duration
	healthy       []int // callers of the healthy Get+Put row
	// healthyRounds are its rounds: two sides a few percent apart need
	// more than the run's plan gives.
	healthyRounds int
}

// fleetSize is the pool of every replica on every side: DefaultLimits's ten.
const fleetSize = 10

// wardOfReadme is the README's ward, the local ward of every replica.
var wardOfReadme = policy.Ward{
	Bucket:  policy.Rate{PerSecond: 20, Burst: 5},
	Backoff: policy.DefaultBackoff,
	Breaker: policy.DefaultBreaker,
}

// gobreakerSettings are both gobreakers': their defaults, except Timeout.
func gobreakerSettings(name string) gobreaker.Settings {
	return gobreaker.Settings{Name: name, Timeout: policy.DefaultBackoff.Cap}
}

// Side names, as the tables and the targets know them.
const (
	sideLocal     = "local ward"
	sideFleet     = "fleet ward"
	sideGobreaker = "gobreaker"
	sideGobDist   = "gobreaker distributed"
)

// fleetOutages and fleetFaults keep what the Fleet suite's scenarios
// measured: its rows keep their own facts rather than timed slices.
var (
	fleetOutages byRow[fleetOutage]
	fleetFaults  byRow[fleetFault]
)

// outageOf is the outage r measured, or nil.
func outageOf(r result) *fleetOutage { return fleetOutages.of(r, "Fleet") }

// faultOf is the local fault r measured, or nil.
func faultOf(r result) *fleetFault { return fleetFaults.of(r, "Fleet") }

// ---- the backend ----

// backend is the service behind every replica: a TCP listener on
// 127.0.0.1 that greets each connection with one byte, then echoes every
// byte it reads. Dead, it closes every connection it served, and closes
// each new one as soon as it accepts it, so a dial fails at the greeting.
// It notes when each connection reached it, dead or alive.
type backend struct {
	ln net.Listener
	wg sync.WaitGroup

	mu       sync.Mutex
	dead     bool
	conns    map[net.Conn]struct{} // served now; nil once closed
	arrivals []int64               // mono() of each accept
}

// greeting is the byte the backend sends first: a dial that reads it
// reached a live backend.
const greeting = '+'

func startBackend() (*backend, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &backend{ln: ln, conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

func (b *backend) addr() string { return b.ln.Addr().String() }

func (b *backend) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		now := mono()
		b.mu.Lock()
		b.arrivals = append(b.arrivals, now)
		if b.dead || b.conns == nil {
			b.mu.Unlock()
			c.Close()
			continue
		}
		b.conns[c] = struct{}{}
		b.mu.Unlock()
		b.wg.Add(1)
		go b.serve(c)
	}
}

func (b *backend) serve(c net.Conn) {
	defer b.wg.Done()
	defer func() {
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
		c.Close()
	}()
	buf := []byte{greeting}
	if _, err := c.Write(buf); err != nil {
		return
	}
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

// kill makes the backend dead: its connections are closed, new ones too.
func (b *backend) kill() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dead = true
	for c := range b.conns {
		c.Close()
	}
}

// revive brings the backend back.
func (b *backend) revive() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dead = false
}

// arrivedIn counts the connections that reached the backend in [from, to).
func (b *backend) arrivedIn(from, to int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n int64
	for _, t := range b.arrivals {
		if t >= from && t < to {
			n++
		}
	}
	return n
}

// since is the arrivals at or after from, as ns after it.
func (b *backend) since(from int64) []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []int64
	for _, t := range b.arrivals {
		if t >= from {
			out = append(out, t-from)
		}
	}
	return out
}

// close stops the backend and waits for its goroutines.
func (b *backend) close() {
	b.ln.Close()
	b.mu.Lock()
	for c := range b.conns {
		c.Close()
	}
	b.conns = nil
	b.mu.Unlock()
	b.wg.Wait()
}

// errLocalFault is a replica's own network failing.
var errLocalFault = errors.New("local network fault")

// dialer opens connections to a backend, as every side's pool does. While
// broken is set it fails at once: the replica's own network is down.
type dialer struct {
	addr   string
	broken *atomic.Bool
}

// dialTimeout bounds a dial and its greeting.
const dialTimeout = 250 * time.Millisecond

func (d dialer) open(ctx context.Context) (net.Conn, error) {
	if d.broken != nil && d.broken.Load() {
		return nil, errLocalFault
	}
	nd := net.Dialer{Timeout: dialTimeout}
	c, err := nd.DialContext(ctx, "tcp", d.addr)
	if err != nil {
		return nil, err
	}
	buf := []byte{0}
	c.SetReadDeadline(time.Now().Add(dialTimeout))
	if _, err := c.Read(buf); err != nil || buf[0] != greeting {
		c.Close()
		if err == nil {
			err = fmt.Errorf("greeted with %q", buf[0])
		}
		return nil, err
	}
	c.SetReadDeadline(time.Time{})
	return c, nil
}

// roundTrip sends a byte on c and reads it back, by ctx's deadline.
func (d dialer) roundTrip(ctx context.Context, c net.Conn) error {
	if d.broken != nil && d.broken.Load() {
		return errLocalFault
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	buf := []byte{'x'}
	if _, err := c.Write(buf); err != nil {
		return err
	}
	_, err := c.Read(buf)
	return err
}

// ---- the replicas ----

// replica is one process of the fleet, as a side builds it: do runs one
// request, close lets go of everything the replica holds.
type replica struct {
	do    func(ctx context.Context) error
	close func()
	// fleet, with the fleet ward, is the replica's moonredis.Fleet: what
	// it says of Redis explains a fleet that fell back on its local wards.
	fleet *moonredis.Fleet
}

// fleetEnv is what the replicas of one run share.
type fleetEnv struct {
	backend string        // the backend's address
	redis   string        // the redis-server's address
	name    string        // the run's own name: the shared keys of one run are its own
	cmds    *atomic.Int64 // Redis commands sent by every replica of the run
}

// fleetSide builds the replicas of one side.
type fleetSide struct {
	name  string
	ours  bool
	build func(env fleetEnv, i int, d dialer) (replica, error)
}

func fleetSides() []fleetSide {
	return []fleetSide{
		{name: sideLocal, build: localReplica},
		{name: sideFleet, ours: true, build: fleetReplica},
		{name: sideGobreaker, build: gobreakerReplica},
		{name: sideGobDist, build: gobDistReplica},
	}
}

// wardPool is a replica's client.Pool of connections, with the README's
// ward and, if fleet is not nil, the fleet ward too.
func wardPool(eng *engine.Engine, d dialer, fleet client.Fleet) (*client.Pool[net.Conn], error) {
	return client.NewPool(eng, client.PoolConfig[net.Conn]{
		Open:   d.open,
		Close:  func(c net.Conn) error { return c.Close() },
		Limits: policy.DefaultLimits,
		Ward:   wardOfReadme,
		Fleet:  fleet,
	})
}

// poolRequest is one request on a client.Pool.
func poolRequest(p *client.Pool[net.Conn], d dialer) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		c, err := p.Get(ctx)
		if err != nil {
			return err
		}
		if err := d.roundTrip(ctx, c); err != nil {
			_ = p.Discard(c)
			return err
		}
		return p.Put(c)
	}
}

// localReplica is a replica with the local ward only.
func localReplica(_ fleetEnv, _ int, d dialer) (replica, error) {
	eng := engine.New()
	p, err := wardPool(eng, d, nil)
	if err != nil {
		shutdownWithin(eng)
		return replica{}, err
	}
	return replica{
		do: poolRequest(p, d),
		close: func() {
			closeWithin(p.Close)
			shutdownWithin(eng)
		},
	}, nil
}

// fleetReplica is a replica with the local ward joined to the fleet ward:
// a moonredis.Fleet with its defaults, on a go-redis client of its own, as
// a process would have.
func fleetReplica(env fleetEnv, i int, d dialer) (replica, error) {
	eng := engine.New()
	rdb := commandsTo(env.redis, env.cmds)
	fl, err := moonredis.NewFleet(eng, moonredis.FleetConfig{Client: rdb, Name: env.name, Replica: strconv.Itoa(i)})
	if err != nil {
		shutdownWithin(eng)
		rdb.Close()
		return replica{}, err
	}
	p, err := wardPool(eng, d, fl)
	if err != nil {
		closeWithin(fl.Close)
		shutdownWithin(eng)
		rdb.Close()
		return replica{}, err
	}
	return replica{
		do: poolRequest(p, d),
		close: func() {
			closeWithin(p.Close)
			closeWithin(fl.Close)
			shutdownWithin(eng)
			rdb.Close()
		},
		fleet: fl,
	}, nil
}

// shutdownWithin shuts a replica's engine down with a few seconds to spare.
func shutdownWithin(eng *engine.Engine) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := eng.Shutdown(ctx); err != nil {
		warn("Fleet: engine shutdown: %v", err)
	}
}

// puddleConns is a puddle pool of connections made by d, of fleetSize.
func puddleConns(d dialer) (*puddle.Pool[net.Conn], error) {
	return puddle.NewPool(&puddle.Config[net.Conn]{
		Constructor: d.open,
		Destructor:  func(c net.Conn) { c.Close() },
		MaxSize:     fleetSize,
	})
}

// puddleRequest is one request on a puddle pool.
func puddleRequest(ctx context.Context, p *puddle.Pool[net.Conn], d dialer) error {
	r, err := p.Acquire(ctx)
	if err != nil {
		return err
	}
	if err := d.roundTrip(ctx, r.Value()); err != nil {
		r.Destroy()
		return err
	}
	r.Release()
	return nil
}

// gobreakerReplica is a gobreaker CircuitBreaker around each request on a
// puddle pool.
func gobreakerReplica(env fleetEnv, _ int, d dialer) (replica, error) {
	p, err := puddleConns(d)
	if err != nil {
		return replica{}, err
	}
	cb := gobreaker.NewCircuitBreaker[struct{}](gobreakerSettings(env.name))
	return replica{
		do: func(ctx context.Context) error {
			_, err := cb.Execute(func() (struct{}, error) { return struct{}{}, puddleRequest(ctx, p, d) })
			return err
		},
		close: p.Close,
	}, nil
}

// gobDistReplica is a gobreaker DistributedCircuitBreaker, its state shared
// by every replica of the run in Redis, around each request on a puddle
// pool. Each replica has a go-redis client of its own, as a process would.
func gobDistReplica(env fleetEnv, i int, d dialer) (replica, error) {
	rdb := commandsTo(env.redis, env.cmds)
	store := newRedisStore(rdb, fmt.Sprintf("%s-%d", env.name, i))
	cb, err := gobreaker.NewDistributedCircuitBreaker[struct{}](store, gobreakerSettings(env.name))
	if err != nil {
		rdb.Close()
		return replica{}, err
	}
	p, err := puddleConns(d)
	if err != nil {
		rdb.Close()
		return replica{}, err
	}
	return replica{
		do: func(ctx context.Context) error {
			_, err := cb.Execute(func() (struct{}, error) { return struct{}{}, puddleRequest(ctx, p, d) })
			return err
		},
		close: func() {
			p.Close()
			rdb.Close()
		},
	}, nil
}

// commandsTo is a go-redis client for addr that adds each command it sends
// to n.
func commandsTo(addr string, n *atomic.Int64) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	rdb.AddHook(commandCounter{n})
	return rdb
}

// ---- gobreaker's SharedDataStore over go-redis ----

// redisStore is gobreaker's SharedDataStore over go-redis. The state is a
// string key. The lock is a key set with NX and an expiry, holding a token
// of this store's, and only its holder deletes it.
//
// Lock tries again every few milliseconds for up to lockWait, and only then
// hands the wait back to gobreaker, which sleeps half a second before it
// asks again. A lock taken with redsync's defaults waits 50 to 250 ms
// between tries: the short wait here is the distributed breaker's best
// case on one machine.
type redisStore struct {
	rdb *redis.Client
	id  string
	seq atomic.Uint64

	mu   sync.Mutex
	held map[string]string // a lock this store holds, and its token
}

const (
	lockTTL  = 5 * time.Second // gobreaker's own mutexTimeout
	lockWait = time.Second
	lockPoll = 5 * time.Millisecond // the mean wait between tries; each is drawn in [0.5, 1.5) of it
)

// errLockBusy is a Lock that gave up: another replica held the lock for
// lockWait.
var errLockBusy = errors.New("gobreaker lock held elsewhere")

// unlockScript deletes the lock only for the token that holds it.
var unlockScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

func newRedisStore(rdb *redis.Client, id string) *redisStore {
	return &redisStore{rdb: rdb, id: id, held: map[string]string{}}
}

// Lock takes the lock named name, waiting up to lockWait for it.
func (s *redisStore) Lock(name string) error {
	ctx := context.Background()
	token := s.id + ":" + strconv.FormatUint(s.seq.Add(1), 10)
	give := time.Now().Add(lockWait)
	for {
		ok, err := s.rdb.SetNX(ctx, name, token, lockTTL).Result()
		if err != nil {
			return err
		}
		if ok {
			s.mu.Lock()
			s.held[name] = token
			s.mu.Unlock()
			return nil
		}
		if time.Now().After(give) {
			return errLockBusy
		}
		time.Sleep(time.Duration(float64(lockPoll) * (0.5 + rand.Float64())))
	}
}

// Unlock frees the lock named name if this store holds it.
func (s *redisStore) Unlock(name string) error {
	s.mu.Lock()
	token, ok := s.held[name]
	delete(s.held, name)
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("unlock of %s, not held", name)
	}
	return unlockScript.Run(context.Background(), s.rdb, []string{name}, token).Err()
}

// GetData reads the state; nil when there is none yet.
func (s *redisStore) GetData(name string) ([]byte, error) {
	b, err := s.rdb.Get(context.Background(), name).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return b, err
}

// SetData writes the state.
func (s *redisStore) SetData(name string, data []byte) error {
	return s.rdb.Set(context.Background(), name, data, 0).Err()
}

// ---- the load ----

// load is the callers of every replica of a run: each sends a request every
// cfg.every, and the replica notes how its requests went.
type load struct {
	reps  []replica
	stats []replicaStats
	stop  chan struct{}
	wg    sync.WaitGroup
	// up is mono() when the backend came back; 0 before.
	up atomic.Int64
	// window is the span the requests ending now count in: 0 while the
	// fleet warms up, then 1 and 2 as the scenario says.
	window atomic.Int32
}

// replicaStats are one replica's requests, by window.
type replicaStats struct {
	ok, failed [3]atomic.Int64
	first      atomic.Int64 // ns from the backend's return to the end of the first request that worked
}

func startLoad(reps []replica, cfg fleetConfig) *load {
	l := &load{reps: reps, stats: make([]replicaStats, len(reps)), stop: make(chan struct{})}
	for i := range reps {
		for range cfg.callers {
			l.wg.Go(func() { l.call(i, cfg) })
		}
	}
	return l
}

func (l *load) call(i int, cfg fleetConfig) {
	// A random phase, so the replicas' requests do not arrive in step.
	select {
	case <-l.stop:
		return
	case <-time.After(time.Duration(rand.Int64N(int64(cfg.every)))):
	}
	tick := time.NewTicker(cfg.every)
	defer tick.Stop()
	s := &l.stats[i]
	for {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
		err := l.reps[i].do(ctx)
		cancel()
		end := mono()
		w := l.window.Load() // a request counts where it ends
		if err != nil {
			s.failed[w].Add(1)
		} else {
			s.ok[w].Add(1)
			if up := l.up.Load(); up > 0 && s.first.Load() == 0 {
				s.first.CompareAndSwap(0, max(end-up, 1))
			}
		}
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
	}
}

func (l *load) end() {
	close(l.stop)
	l.wg.Wait()
}

// buildReplicas builds n replicas of s at once, each dialling through its
// own dialer.
func buildReplicas(s fleetSide, env fleetEnv, n int, broken []*atomic.Bool) ([]replica, error) {
	reps := make([]replica, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		d := dialer{addr: env.backend}
		if broken != nil {
			d.broken = broken[i]
		}
		wg.Go(func() { reps[i], errs[i] = s.build(env, i, d) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeReplicas(reps)
		return nil, err
	}
	return reps, nil
}

func closeReplicas(reps []replica) {
	var wg sync.WaitGroup
	for _, r := range reps {
		if r.close != nil {
			wg.Go(r.close)
		}
	}
	wg.Wait()
}

// ---- the outage ----

// outageRound is what one side's fleet of replicas made of one outage.
type outageRound struct {
	dead        time.Duration // how long the backend was dead
	settleDials int64         // dials that reached the dead backend in its first cfg.settle
	dials       int64         // dials that reached it after that, to its return
	first       []float64     // per replica: ns from the return to its first success; +Inf for none
	arrivals    []int64       // ns after the return of each connection that reached the backend, to the end
	redis       int64         // Redis commands the replicas sent while the backend was dead
	failedEarly int64         // requests that failed before the backend died
	failedAfter int64         // requests that failed after it was back
	// With the fleet ward: the replicas' calls to Redis that failed or
	// took longer than the fleet's Timeout, and the times a replica lost
	// Redis and followed its local ward alone.
	redisFailed, alone int64
}

// outageStat is one side's rounds at one fleet size.
type outageStat struct {
	side   string
	ours   bool
	rounds []outageRound
}

// outageLevel is every side at one fleet size.
type outageLevel struct {
	n     int
	sides []outageStat
}

// fleetOutage is the outage row: every side at every fleet size.
type fleetOutage struct {
	cfg    fleetConfig
	levels []outageLevel
}

// outageName is the outage row's name, with how it runs.
func outageName(cfg fleetConfig) string {
	return fmt.Sprintf("outage: backend dead %v to %v, then back for %v; %d callers per replica, a request each every %v, %v deadline",
		cfg.dead, cfg.dead+cfg.jitter, cfg.after, cfg.callers, cfg.every, cfg.timeout)
}

// outageRow runs every side's fleet through the outage at every size, in
// rotating order, and keeps what it measured under the row's name.
func outageRow(srv *redistest.Server, sides []fleetSide, cfg fleetConfig, say progress) (result, error) {
	o := &fleetOutage{cfg: cfg}
	run := 0
	for _, n := range cfg.replicas {
		lv := outageLevel{n: n}
		for _, s := range sides {
			lv.sides = append(lv.sides, outageStat{side: s.name, ours: s.ours})
		}
		for round := range cfg.rounds {
			dead := cfg.dead
			if cfg.jitter > 0 {
				dead += time.Duration(rand.Int64N(int64(cfg.jitter)))
			}
			for j := range sides {
				i := (j + round + run) % len(sides)
				say(fmt.Sprintf("Fleet outage replicas=%d %s round %d/%d", n, strings.ReplaceAll(sides[i].name, " ", "-"), round+1, cfg.rounds))
				r, err := outageOnce(srv, sides[i], n, dead, cfg)
				if err != nil {
					return result{}, fmt.Errorf("fleet outage, %d replicas, %s: %w", n, sides[i].name, err)
				}
				lv.sides[i].rounds = append(lv.sides[i].rounds, r)
			}
		}
		run++
		o.levels = append(o.levels, lv)
	}
	fleetOutages.keep(outageName(cfg), o)
	return result{}, nil
}

// runSeq names each run's keys in Redis apart from every other run's.
var runSeq atomic.Int64

// outageOnce builds n replicas of s, loads them, kills the backend, brings
// it back, and says what the replicas made of it.
func outageOnce(srv *redistest.Server, s fleetSide, n int, dead time.Duration, cfg fleetConfig) (outageRound, error) {
	be, err := startBackend()
	if err != nil {
		return outageRound{}, err
	}
	defer be.close()
	var cmds atomic.Int64
	env := fleetEnv{backend: be.addr(), redis: srv.Addr(), name: fmt.Sprintf("bench-fleet-%d-%d", os.Getpid(), runSeq.Add(1)), cmds: &cmds}
	reps, err := buildReplicas(s, env, n, nil)
	if err != nil {
		return outageRound{}, err
	}
	l := startLoad(reps, cfg)
	time.Sleep(cfg.warm)

	l.window.Store(1)
	down := mono()
	be.kill()
	c0 := cmds.Load()
	time.Sleep(dead)
	up := mono()
	l.up.Store(up)
	l.window.Store(2)
	be.revive()
	c1 := cmds.Load()
	time.Sleep(cfg.after)
	l.end()
	var redisFailed, alone int64
	for _, rep := range reps {
		if rep.fleet != nil {
			st := rep.fleet.Stats()
			redisFailed += st.Failed
			alone += st.Alone
		}
	}
	closeReplicas(reps)

	r := outageRound{
		redisFailed: redisFailed,
		alone:       alone,
		dead:        time.Duration(up - down),
		settleDials: be.arrivedIn(down, down+int64(cfg.settle)),
		dials:       be.arrivedIn(down+int64(cfg.settle), up),
		arrivals:    be.since(up),
		redis:       c1 - c0,
	}
	for i := range l.stats {
		st := &l.stats[i]
		r.failedEarly += st.failed[0].Load()
		r.failedAfter += st.failed[2].Load()
		if f := st.first.Load(); f > 0 {
			r.first = append(r.first, float64(f))
		} else {
			r.first = append(r.first, math.Inf(1))
		}
	}
	return r, nil
}

// dialsPerSecond is the median round's dials per second while the backend
// was dead, after its first cfg.settle.
func (s outageStat) dialsPerSecond(cfg fleetConfig) float64 {
	return s.medianOf(func(r outageRound) float64 { return float64(r.dials) / (r.dead - cfg.settle).Seconds() })
}

func (s outageStat) medianOf(f func(outageRound) float64) float64 {
	var xs []float64
	for _, r := range s.rounds {
		xs = append(xs, f(r))
	}
	return median(xs)
}

// firsts is every replica's time to its first success, over every round,
// sorted; a replica that had none is +Inf.
func (s outageStat) firsts() []float64 {
	var xs []float64
	for _, r := range s.rounds {
		xs = append(xs, r.first...)
	}
	slices.Sort(xs)
	return xs
}

// newWithin is the median round's connections that reached the backend
// within d of its return.
func (s outageStat) newWithin(d time.Duration) float64 {
	return s.medianOf(func(r outageRound) float64 {
		n := 0
		for _, t := range r.arrivals {
			if t < int64(d) {
				n++
			}
		}
		return float64(n)
	})
}

// curve is the mean over rounds of the connections that reached the
// backend from its return to each of the points.
func (s outageStat) curve(points []time.Duration) []float64 {
	ys := make([]float64, len(points))
	for _, r := range s.rounds {
		for i, p := range points {
			for _, t := range r.arrivals {
				if t <= int64(p) {
					ys[i]++
				}
			}
		}
	}
	for i := range ys {
		ys[i] /= float64(max(len(s.rounds), 1))
	}
	return ys
}

// rampAllows is the most new connections the fleet ward lets n replicas
// open in the first d after the backend's return: the probe's, one at once
// for each replica, and what the ramp's curve allows (the fleets here take
// the default Ramp).
func rampAllows(n int, d time.Duration) float64 {
	return 1 + float64(n) + policy.Ramp{}.Allows(d)
}

// msText formats ns as milliseconds, "never" for +Inf.
func msText(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "never"
	case math.IsNaN(v):
		return "–"
	case v < 10e6:
		return fmt.Sprintf("%.1f ms", v/1e6)
	}
	return fmt.Sprintf("%.0f ms", v/1e6)
}

// outageTable is the outage row's table.
func outageTable(o *fleetOutage) (head []string, body [][]string) {
	cfg := o.cfg
	head = []string{"replicas", "side", "dials/s while dead", "dials in its first " + cfg.settle.String(),
		"back → first success: p50", "p99", "max", "new conns in 100 ms", "in 1 s", "Redis cmd/s while dead", "note"}
	for _, lv := range o.levels {
		for i, s := range lv.sides {
			fs := s.firsts()
			never := 0
			for _, f := range fs {
				if math.IsInf(f, 1) {
					never++
				}
			}
			cells := []string{"", s.side,
				fmt.Sprintf("%.1f", s.dialsPerSecond(cfg)),
				fmt.Sprintf("%.0f", s.medianOf(func(r outageRound) float64 { return float64(r.settleDials) })),
				msText(quantile(fs, 0.5)), msText(quantile(fs, 0.99)), msText(quantile(fs, 1)),
				fmt.Sprintf("%.0f", s.newWithin(100*time.Millisecond)),
				fmt.Sprintf("%.0f", s.newWithin(time.Second)),
				fmt.Sprintf("%.0f", s.medianOf(func(r outageRound) float64 { return float64(r.redis) / r.dead.Seconds() })),
				"",
			}
			if i == 0 {
				cells[0] = fmt.Sprint(lv.n)
			}
			var notes []string
			if never > 0 {
				notes = append(notes, fmt.Sprintf("%d of %d replicas had no success within %v", never, len(fs), cfg.after))
			}
			if early := s.medianOf(func(r outageRound) float64 { return float64(r.failedEarly) }); early > 0 {
				notes = append(notes, fmt.Sprintf("%.0f failed before the outage", early))
			}
			notes = append(notes, fmt.Sprintf("%.0f failed after the return", s.medianOf(func(r outageRound) float64 { return float64(r.failedAfter) })))
			if s.side == sideFleet {
				notes = append(notes, fmt.Sprintf("the ramp allows %.0f new conns in 100 ms", math.Floor(rampAllows(lv.n, 100*time.Millisecond))))
				failed := s.medianOf(func(r outageRound) float64 { return float64(r.redisFailed) })
				alone := s.medianOf(func(r outageRound) float64 { return float64(r.alone) })
				if failed > 0 || alone > 0 {
					notes = append(notes, fmt.Sprintf("%.0f Redis calls failed or timed out, replicas alone %.0f times", failed, alone))
				}
			}
			cells[len(cells)-1] = strings.Join(notes, "; ")
			body = append(body, cells)
		}
	}
	return head, body
}

// ---- one replica's local fault ----

// faultStat is one side's local-fault run.
type faultStat struct {
	side                 string
	ours                 bool
	okBefore, failBefore int64 // the other replicas' requests before the fault
	okDuring, failDuring int64 // and during it
	faultyFailed         int64 // the faulty replica's failed requests during the fault
}

func successRate(ok, failed int64) float64 {
	if ok+failed == 0 {
		return math.NaN()
	}
	return float64(ok) / float64(ok+failed)
}

func (s faultStat) before() float64 { return successRate(s.okBefore, s.failBefore) }
func (s faultStat) during() float64 { return successRate(s.okDuring, s.failDuring) }

// fleetFault is the local-fault row: every side's run.
type fleetFault struct {
	cfg   fleetConfig
	sides []faultStat
}

func faultName(cfg fleetConfig) string {
	return fmt.Sprintf("one replica's dials fail for %v, %d replicas; the other %d's requests", cfg.fault, cfg.faultReplicas, cfg.faultReplicas-1)
}

// faultRow runs every side's fleet with a healthy backend, then breaks
// replica 0's own network, and keeps what the others made of it.
func faultRow(srv *redistest.Server, sides []fleetSide, cfg fleetConfig, say progress) (result, error) {
	f := &fleetFault{cfg: cfg}
	for _, s := range sides {
		say(fmt.Sprintf("Fleet local fault %s", strings.ReplaceAll(s.name, " ", "-")))
		st, err := faultOnce(srv, s, cfg)
		if err != nil {
			return result{}, fmt.Errorf("fleet local fault, %s: %w", s.name, err)
		}
		f.sides = append(f.sides, st)
	}
	fleetFaults.keep(faultName(cfg), f)
	return result{}, nil
}

func faultOnce(srv *redistest.Server, s fleetSide, cfg fleetConfig) (faultStat, error) {
	be, err := startBackend()
	if err != nil {
		return faultStat{}, err
	}
	defer be.close()
	n := cfg.faultReplicas
	broken := make([]*atomic.Bool, n)
	for i := range broken {
		broken[i] = new(atomic.Bool)
	}
	var cmds atomic.Int64
	env := fleetEnv{backend: be.addr(), redis: srv.Addr(), name: fmt.Sprintf("bench-fleet-%d-%d", os.Getpid(), runSeq.Add(1)), cmds: &cmds}
	reps, err := buildReplicas(s, env, n, broken)
	if err != nil {
		return faultStat{}, err
	}
	l := startLoad(reps, cfg)
	time.Sleep(cfg.warm)
	l.window.Store(1)
	time.Sleep(cfg.fault)
	broken[0].Store(true)
	l.window.Store(2)
	time.Sleep(cfg.fault)
	l.end()
	closeReplicas(reps)

	st := faultStat{side: s.name, ours: s.ours, faultyFailed: l.stats[0].failed[2].Load()}
	for i := 1; i < n; i++ {
		st.okBefore += l.stats[i].ok[1].Load()
		st.failBefore += l.stats[i].failed[1].Load()
		st.okDuring += l.stats[i].ok[2].Load()
		st.failDuring += l.stats[i].failed[2].Load()
	}
	return st, nil
}

func pct(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.2f%%", 100*x)
}

func faultTable(f *fleetFault) (head []string, body [][]string) {
	head = []string{"side", "others' success before", "during the fault", "others' requests during", "faulty replica's failed", "note"}
	for _, s := range f.sides {
		body = append(body, []string{s.side, pct(s.before()), pct(s.during()),
			fmt.Sprint(s.okDuring + s.failDuring), fmt.Sprint(s.faultyFailed), ""})
	}
	return head, body
}

// ---- the healthy Get+Put ----

// countFleet is the healthy row's count: Redis commands sent.
const countFleet = "fleet"

// fleetNote is the healthy row's note: Redis commands per Get.
func fleetNote(m *measured) string {
	if m.ops == 0 {
		return ""
	}
	if m.count == 0 {
		return "0 Redis cmd/Get"
	}
	return fmt.Sprintf("%.3g Redis cmd/Get", m.count/m.ops)
}

// healthyRow is Get and Put back, no request sent, on one replica's pool
// kept full, on a healthy backend: what each side costs when nothing is
// wrong.
func healthyRow(srv *redistest.Server, be *backend, cfg fleetConfig) row {
	build := func(s fleetSide) func(int) (contender, error) {
		return func(int) (contender, error) {
			var cmds atomic.Int64
			env := fleetEnv{backend: be.addr(), redis: srv.Addr(), name: fmt.Sprintf("bench-fleet-%d-%d", os.Getpid(), runSeq.Add(1)), cmds: &cmds}
			return healthyContender(s, env, &cmds)
		}
	}
	r := row{
		suite:   "Fleet",
		name:    "Get+Put, healthy backend, pool of 10 kept full",
		callers: cfg.healthy,
		batch:   4,
		every:   16,
		count:   countFleet,
		rounds:  cfg.healthyRounds,
	}
	for _, s := range fleetSides() {
		r.sides = append(r.sides, side{name: s.name, ours: s.ours, build: build(s)})
	}
	return r
}

// healthyContender is a replica of s whose operation is a Get and a Put
// with nothing sent, on a pool filled up front.
func healthyContender(s fleetSide, env fleetEnv, cmds *atomic.Int64) (contender, error) {
	d := dialer{addr: env.backend}
	var errs atomic.Int64
	var run func(n int)
	var closeAll func()
	ctx := context.Background()
	switch s.name {
	case sideLocal, sideFleet:
		eng := engine.New()
		var fleet client.Fleet
		var rdb *redis.Client
		var fl *moonredis.Fleet
		if s.name == sideFleet {
			rdb = commandsTo(env.redis, cmds)
			var err error
			if fl, err = moonredis.NewFleet(eng, moonredis.FleetConfig{Client: rdb, Name: env.name}); err != nil {
				shutdownWithin(eng)
				rdb.Close()
				return contender{}, err
			}
			fleet = fl
		}
		p, err := wardPool(eng, d, fleet)
		if err != nil {
			if fl != nil {
				closeWithin(fl.Close)
				rdb.Close()
			}
			shutdownWithin(eng)
			return contender{}, err
		}
		closeAll = func() {
			closeWithin(p.Close)
			if fl != nil {
				closeWithin(fl.Close)
			}
			shutdownWithin(eng)
			if rdb != nil {
				rdb.Close()
			}
		}
		if err := fillPool(ctx, p); err != nil {
			closeAll()
			return contender{}, err
		}
		run = func(n int) {
			for range n {
				c, err := p.Get(ctx)
				if err != nil {
					errs.Add(1)
					continue
				}
				if p.Put(c) != nil {
					errs.Add(1)
				}
			}
		}
	case sideGobreaker, sideGobDist:
		p, err := puddleConns(d)
		if err != nil {
			return contender{}, err
		}
		var rdb *redis.Client
		closeAll = func() {
			p.Close()
			if rdb != nil {
				rdb.Close()
			}
		}
		for range fleetSize {
			if err := p.CreateResource(ctx); err != nil {
				closeAll()
				return contender{}, err
			}
		}
		var execute func(func() (struct{}, error)) (struct{}, error)
		if s.name == sideGobreaker {
			execute = gobreaker.NewCircuitBreaker[struct{}](gobreakerSettings(env.name)).Execute
		} else {
			rdb = commandsTo(env.redis, cmds)
			cb, err := gobreaker.NewDistributedCircuitBreaker[struct{}](newRedisStore(rdb, env.name), gobreakerSettings(env.name))
			if err != nil {
				closeAll()
				return contender{}, err
			}
			execute = cb.Execute
		}
		getPut := func() (struct{}, error) {
			r, err := p.Acquire(ctx)
			if err != nil {
				return struct{}{}, err
			}
			r.Release()
			return struct{}{}, nil
		}
		run = func(n int) {
			for range n {
				if _, err := execute(getPut); err != nil {
					errs.Add(1)
				}
			}
		}
	default:
		return contender{}, fmt.Errorf("no healthy Get+Put for side %q", s.name)
	}
	return contender{run: run, close: closeAll, count: cmds.Load, errs: errs.Load}, nil
}

// fillPool makes the pool's every connection, then gives them all back.
func fillPool(ctx context.Context, p *client.Pool[net.Conn]) error {
	held := make([]net.Conn, 0, fleetSize)
	defer func() {
		for _, c := range held {
			_ = p.Put(c)
		}
	}()
	for range fleetSize {
		c, err := p.Get(ctx)
		if err != nil {
			return err
		}
		held = append(held, c)
	}
	return nil
}

// ---- the suite ----

// startRedis is how the suite gets its redis-server; the tests change it.
var startRedis = redistest.Start

// fleetSuite starts a redis-server and a healthy backend for the healthy
// row, and returns the suite's rows. Its error wraps
// redistest.ErrNoServer when the machine has no redis-server.
func fleetSuite(_ *engine.Engine, cfg config) ([]row, func(), error) {
	dir, err := os.MkdirTemp("", "moonpool-fleet-")
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := startRedis(ctx, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	be, err := startBackend()
	if err != nil {
		srv.Stop()
		os.RemoveAll(dir)
		return nil, nil, err
	}
	forget := onInterrupt(func() { srv.Stop(); os.RemoveAll(dir) })
	stop := func() {
		forget()
		be.close()
		srv.Stop()
		os.RemoveAll(dir)
	}
	fc := cfg.fleet
	sides := fleetSides()
	rows := []row{
		{suite: "Fleet", name: outageName(fc), scenario: func(say progress) (result, error) { return outageRow(srv, sides, fc, say) }},
		healthyRow(srv, be, fc),
		{suite: "Fleet", name: faultName(fc), scenario: func(say progress) (result, error) { return faultRow(srv, sides, fc, say) }},
	}
	return rows, stop, nil
}

// tableOf is the table of a row that does not print the common columns:
// the Fleet suite's scenarios, then those ownTable knows.
func tableOf(r result) (head []string, body [][]string, ok bool) {
	if o := outageOf(r); o != nil {
		head, body = outageTable(o)
		return head, body, true
	}
	if f := faultOf(r); f != nil {
		head, body = faultTable(f)
		return head, body, true
	}
	return ownTable(r)
}

// ---- the targets ----

// fleetTargets checks the Fleet suite's rows; none when it did not run.
func fleetTargets(results []result) []check {
	var o *fleetOutage
	var f *fleetFault
	var healthy *result
	for i := range results {
		r := results[i]
		if x := outageOf(r); x != nil {
			o = x
		}
		if x := faultOf(r); x != nil {
			f = x
		}
		if r.row.suite == "Fleet" && r.row.count == countFleet {
			healthy = &results[i]
		}
	}
	if o == nil && f == nil && healthy == nil {
		return nil
	}
	const group = "fleet ward"
	var cs []check
	if o != nil {
		cs = append(cs, outageTargets(o)...)
	}
	ratio := check{group: group, target: "Fleet: healthy Get+Put with the fleet ward at most 1.05× the local ward (median of each round's ratio)"}
	cmds := check{group: group, target: "Fleet: healthy Get+Put with the fleet ward sends 0 Redis commands per Get"}
	if healthy != nil {
		s, worst, ok := pairedRatios(healthy, sideFleet, sideLocal)
		ratio.measured, ratio.met, ratio.known = s, worst <= 1.05, ok
		var parts []string
		most := 0.0
		for _, lv := range healthy.levels {
			if m := sideOf(lv, sideFleet); m != nil {
				cmds.known = true
				most = max(most, m.count)
				parts = append(parts, fmt.Sprintf("%d: %.0f commands in %.0f Gets", lv.callers, m.count, m.ops))
			}
		}
		cmds.measured, cmds.met = strings.Join(parts, ", ")+" (median slice)", most == 0
	}
	cs = append(cs, ratio, cmds)
	held := check{group: group, target: "Fleet: one replica's local fault does not hold the other N−1 (their success rate unchanged)"}
	if f != nil {
		for _, s := range f.sides {
			if s.side == sideFleet {
				held.known = true
				held.measured = fmt.Sprintf("%s during the fault, %s before", pct(s.during()), pct(s.before()))
				held.met = s.during() >= s.before()-0.005
			}
		}
	}
	return append(cs, held)
}

// outageTargets: the fleet ward's dials while dead at the largest fleet,
// against its own at one replica and the local ward's at the same size,
// and the return to the first success at every replica.
func outageTargets(o *fleetOutage) []check {
	const group = "fleet ward"
	at := func(n int, side string) *outageStat {
		for _, lv := range o.levels {
			if lv.n != n {
				continue
			}
			for i := range lv.sides {
				if lv.sides[i].side == side {
					return &lv.sides[i]
				}
			}
		}
		return nil
	}
	lo, hi := o.levels[0].n, o.levels[len(o.levels)-1].n
	cfg := o.cfg
	one := check{group: group, target: fmt.Sprintf("Fleet: the fleet ward's dials/s while dead at %d replicas at most 1.5× its own at %d", hi, lo)}
	fifth := check{group: group, target: fmt.Sprintf("Fleet: the fleet ward's dials/s while dead at %d replicas at most a fifth of the local ward's", hi)}
	back := check{group: group, target: fmt.Sprintf("Fleet: from the backend's return to the first success at every replica, p99 at most 100 ms at %d replicas", hi)}
	fl, fl1, local := at(hi, sideFleet), at(lo, sideFleet), at(hi, sideLocal)
	if fl != nil && fl1 != nil {
		a, b := fl.dialsPerSecond(cfg), fl1.dialsPerSecond(cfg)
		one.known, one.met = true, a <= 1.5*b
		one.measured = fmt.Sprintf("%.1f/s against %.1f/s (%s)", a, b, times(a/b))
	}
	if fl != nil && local != nil {
		a, b := fl.dialsPerSecond(cfg), local.dialsPerSecond(cfg)
		fifth.known, fifth.met = true, a <= b/5
		fifth.measured = fmt.Sprintf("%.1f/s against %.1f/s (%s)", a, b, times(a/b))
	}
	if fl != nil {
		p := quantile(fl.firsts(), 0.99)
		back.known, back.met = true, p <= 100e6
		back.measured = fmt.Sprintf("p99 %s, max %s", msText(p), msText(quantile(fl.firsts(), 1)))
	}
	ramp := check{group: group, target: "Fleet: new connections in the first 100 ms after the return at most what the fleet ward's ramp allows, at every fleet size", met: true}
	var parts []string
	for _, lv := range o.levels {
		if s := at(lv.n, sideFleet); s != nil {
			got, most := s.newWithin(100*time.Millisecond), math.Floor(rampAllows(lv.n, 100*time.Millisecond))
			ramp.known, ramp.met = true, ramp.met && got <= most
			parts = append(parts, fmt.Sprintf("%d: %.0f of %.0f", lv.n, got, most))
		}
	}
	ramp.measured = strings.Join(parts, ", ")
	return []check{one, fifth, back, ramp}
}

// ---- the plots ----

// fleetCurveFile is the outage's plot, beside results.md.
const fleetCurveFile = "fleet-outage-new-connections.svg"

// fleetPlots writes the outage's curve of new connections after the
// backend's return into dir, and returns the file's name.
func fleetPlots(dir string, results []result) ([]string, error) {
	var names []string
	for _, r := range results {
		o := outageOf(r)
		if o == nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, fleetCurveFile), []byte(curvePlot(o)), 0o644); err != nil {
			return nil, err
		}
		names = append(names, fleetCurveFile)
	}
	return names, nil
}

// curvePlot draws, for each fleet size, the connections that reached the
// backend since its return against the time since, a line per side.
func curvePlot(o *fleetOutage) string {
	const (
		panelW, panelH = 300, 260
		top, left, gap = 80, 70, 60
		bottom         = 50
	)
	width := max(left+len(o.levels)*(panelW+gap), left+(len(o.levels[0].sides)+1)*170) // the panels, or the legend
	height := top + panelH + bottom
	colours := []string{"#1f5fbf", "#e07b00", "#7a7a7a", "#2a9d3a"}
	span := o.cfg.after
	var points []time.Duration
	for t := time.Duration(0); t <= span; t += span / 100 {
		points = append(points, t)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">Fleet outage: connections reaching the backend after its return</text>`+"\n", left)
	sides := o.levels[0].sides
	for si, s := range sides {
		x, y := left+si*170, 42
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="4" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			x, y-5, colours[si%len(colours)], x+20, y, html.EscapeString(s.side))
		if s.side == sideFleet {
			x := left + len(sides)*170
			fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-dasharray="2 3"/><text x="%d" y="%d">what its ramp allows</text>`+"\n",
				x, y-3, x+14, y-3, colours[si%len(colours)], x+20, y)
		}
	}
	for p, lv := range o.levels {
		x0 := float64(left + p*(panelW+gap))
		curves := make([][]float64, len(lv.sides))
		yMax := 0.0
		for i, s := range lv.sides {
			curves[i] = s.curve(points)
			yMax = max(yMax, curves[i][len(curves[i])-1])
		}
		step := niceStep(yMax / 4)
		yMax = math.Max(step*math.Ceil(yMax/step), step)
		xAt := func(t time.Duration) float64 { return x0 + float64(t)/float64(span)*panelW }
		yAt := func(v float64) float64 { return float64(top) + panelH - v/yMax*panelH }
		title := fmt.Sprintf("%d replicas", lv.n)
		if lv.n == 1 {
			title = "1 replica"
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" font-weight="bold">%s</text>`+"\n", x0, top-6, title)
		for v := 0.0; v <= yMax+step/2; v += step {
			y := yAt(v)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x0, y, x0+panelW, y)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#555">%g</text>`+"\n", x0-6, y+4, v)
		}
		tickStep := niceStep(float64(span/time.Millisecond) / 5)
		for ms := 0.0; ms <= float64(span/time.Millisecond); ms += tickStep {
			x := xAt(time.Duration(ms * float64(time.Millisecond)))
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`+"\n", x, top, x, top+panelH)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%g</text>`+"\n", x, top+panelH+16, ms)
		}
		x100 := xAt(100 * time.Millisecond)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#999" stroke-dasharray="4 3"/>`+"\n", x100, top, x100, top+panelH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">ms after the return</text>`+"\n", x0+panelW/2, top+panelH+34)
		fmt.Fprintf(&b, `<text transform="translate(%.1f %d) rotate(-90)" text-anchor="middle" fill="#555">connections since the return</text>`+"\n", x0-44, top+panelH/2)
		if i := slices.IndexFunc(lv.sides, func(s outageStat) bool { return s.side == sideFleet }); i >= 0 {
			// What the fleet ward's ramp allows, dashed in its colour.
			var pts []string
			for _, t := range points {
				v := rampAllows(lv.n, t)
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xAt(t), yAt(min(v, yMax))))
				if v >= yMax {
					break
				}
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1" stroke-dasharray="2 3" points="%s"/>`+"\n", colours[i%len(colours)], strings.Join(pts, " "))
		}
		for i, ys := range curves {
			var pts []string
			for j, t := range points {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xAt(t), yAt(ys[j])))
			}
			w := 2
			if lv.sides[i].ours {
				w = 3
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="%d" points="%s"/>`+"\n", colours[i%len(colours)], w, strings.Join(pts, " "))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
