package main

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// contender is one side of a pair, built and warm. run performs n
// operations in a row on the calling goroutine; it may be called from many
// goroutines at once. close lets go of what it holds.
type contender struct {
	run   func(n int)
	close func()
	// count, if set, is a running count the row reports per operation: the
	// calls allowed by a limiter, or the calls that reached a failing
	// backend.
	count func() int64
	// extra, if set, is a second running count, for a row whose note
	// needs two: the Redis rows count commands, and calls let through.
	extra func() int64
	// cpu, if set, is the CPU time in microseconds a server the side
	// calls has used: the Redis rows read redis-server's, which only the
	// side whose slice runs is calling.
	cpu func() int64
	// errs, if set, counts operations that failed where none should (a Get
	// that returned an error from a healthy pool). Any is reported.
	errs func() int64
}

// side is one library in a row: how to build it for a number of callers.
type side struct {
	name  string
	ours  bool
	build func(callers int) (contender, error)
}

// row is one comparison: the same work done by each side at each level of
// callers, alternating side by side within every round.
type row struct {
	suite   string // Pool, Rate, Gate, Breaker, Core, Keyed
	name    string // what distinguishes the row within its suite
	callers []int
	sides   []side

	batch int // operations between looks at the stop flag
	every int // at least this many operations between two timed ones

	// fixed > 0 runs exactly fixed operations per slice, split among the
	// callers, on a side built afresh for the slice (a breaker that has
	// seen nothing, a keyed limiter that holds no key); otherwise a side
	// is built once per level and each slice runs for the configured time.
	fixed int
	heap  bool // with fixed: report the live heap grown per operation
	count string
	// plan, if set, replaces the run's: a database row needs longer
	// slices than a row of nanosecond calls.
	plan *plan
	// scenario, if set, replaces the slices altogether: the row is run
	// its own way (the Postgres restart) and reports a table of its own.
	scenario func(say progress) (result, error)
	// rounds, if above zero, overrides the plan's: a row whose every
	// slice is a million keys needs fewer.
	rounds int
}

// Counts a row can report beside the times.
const (
	countAllowed = "allowed" // share of calls let through
	countBackend = "backend" // calls that reached the backend, of all calls
	countOpened  = "opened"  // connections the side opened while built, warm-up included
	countRedis   = "redis"   // Redis commands sent, and (extra) calls let through
)

// measured is one side's result at one level of callers.
type measured struct {
	side     string
	ours     bool
	ns       float64   // ns per operation: the median over rounds
	rounds   []float64 // ns per operation in each round
	allocs   float64   // heap allocations per operation, over every round
	p50, p99 float64   // latency of one call in ns, over every round's samples
	p999     float64   // the same, for the Postgres rows
	samples  int
	count    float64 // the row's count per slice (median over rounds)
	extra    float64 // its second count per slice (median over rounds)
	cpu      float64 // the server's CPU µs per slice (median over rounds)
	ops      float64 // operations per slice (median over rounds)
	heap     float64 // live heap bytes grown per operation (median over rounds)
	total    float64 // with countOpened: the count over the whole level
	errs     int64
}

// level is every side's result at one number of callers.
type level struct {
	callers int
	sides   []measured
}

// result is a measured row.
type result struct {
	row     row
	levels  []level
	restart []restartSide // a restart scenario's, instead of levels
}

// plan is how long and how often the harness measures.
type plan struct {
	rounds  int           // alternations of the sides
	slice   time.Duration // how long each side runs per round (timed rows)
	samples int           // latency samples kept per side per level
}

// epoch is the origin of mono: time.Since reads only the monotonic clock,
// which is cheaper than time.Now.
var epoch = time.Now()

func mono() int64 { return int64(time.Since(epoch)) }

// clockCost is what a pair of clock reads adds to a timed call when it
// does nothing: the median of many back-to-back readings. It is taken off
// every latency sample so a fast call is not reported as slow as the clock.
var clockCost = sync.OnceValue(func() float64 {
	d := make([]int64, 2001)
	for i := range d {
		t := mono()
		d[i] = mono() - t
	}
	slices.Sort(d)
	return float64(d[len(d)/2])
})

// slice is one run of one side.
type slice struct {
	ops     int64
	elapsed time.Duration
	mallocs uint64
	lat     []float64
	count   int64
	extra   int64
	cpu     int64
	heap    int64
	errs    int64
}

// runSlice runs c with callers goroutines, either for d or for fixed
// operations in all, timing one operation in every `every` (up to keep of
// them).
func runSlice(c contender, callers int, d time.Duration, fixed, batch, every, keep int, heap bool) slice {
	batch = max(batch, 1)
	every = max(every, batch)
	perWorker := max(keep/callers, 8)
	var count0, extra0, cpu0, errs0 int64
	if c.count != nil {
		count0 = c.count()
	}
	if c.extra != nil {
		extra0 = c.extra()
	}
	if c.cpu != nil {
		cpu0 = c.cpu()
	}
	if c.errs != nil {
		errs0 = c.errs()
	}

	var stop atomic.Bool
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	ops := make([]int64, callers)
	lats := make([][]float64, callers)
	cost := clockCost()
	for w := range callers {
		quota := -1 // timed: run until stop
		if fixed > 0 {
			quota = fixed / callers
			if w < fixed%callers {
				quota++
			}
		}
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			lat := make([]float64, 0, perWorker)
			var n int64
			since := every // operations since the last timed one: time the first
			ready.Done()
			<-start
			for quota != 0 && !(quota < 0 && stop.Load()) {
				b := batch
				if quota > 0 {
					b = min(b, quota)
					quota -= b
				}
				if since+b > every && len(lat) < cap(lat) {
					// Time this batch's first call on its own.
					t := mono()
					c.run(1)
					lat = append(lat, max(float64(mono()-t)-cost, 0))
					if b > 1 {
						c.run(b - 1)
					}
					since = b - 1
				} else {
					c.run(b)
					since += b
				}
				n += int64(b)
			}
			ops[w] = n
			lats[w] = lat
		}()
	}
	ready.Wait()
	var before, after runtime.MemStats
	if heap {
		runtime.GC()
	}
	runtime.ReadMemStats(&before)
	t0 := mono()
	close(start)
	if fixed <= 0 {
		time.Sleep(d)
		stop.Store(true)
	}
	done.Wait()
	t1 := mono()
	runtime.ReadMemStats(&after)
	s := slice{elapsed: time.Duration(t1 - t0), mallocs: after.Mallocs - before.Mallocs}
	if heap {
		runtime.GC()
		runtime.ReadMemStats(&after)
		s.heap = int64(after.HeapAlloc) - int64(before.HeapAlloc)
	}
	for w := range callers {
		s.ops += ops[w]
		s.lat = append(s.lat, lats[w]...)
	}
	if c.count != nil {
		s.count = c.count() - count0
	}
	if c.extra != nil {
		s.extra = c.extra() - extra0
	}
	if c.cpu != nil {
		if end := c.cpu(); cpu0 > 0 && end > 0 {
			s.cpu = end - cpu0 // 0, and so not reported, when a read failed
		}
	}
	if c.errs != nil {
		s.errs = c.errs() - errs0
	}
	return s
}

// progress is told what is being measured, for the line on stderr.
type progress func(what string)

// measure runs one row at every level of callers: in each round every side
// runs one slice, in an order that rotates from round to round so that no
// side always goes first, and a machine that slows down for a moment
// slows both sides alike.
// next is called after each level.
func measure(r row, p plan, say progress, next func()) (result, error) {
	if r.scenario != nil {
		res, err := r.scenario(say)
		res.row = r
		next()
		return res, err
	}
	if r.plan != nil {
		p = *r.plan
	}
	res := result{row: r}
	for _, callers := range r.callers {
		lv, err := measureLevel(r, p, callers, say)
		if err != nil {
			return res, fmt.Errorf("%s %s callers=%d: %w", r.suite, r.name, callers, err)
		}
		res.levels = append(res.levels, lv)
		next()
	}
	return res, nil
}

func measureLevel(r row, p plan, callers int, say progress) (level, error) {
	if r.rounds > 0 {
		p.rounds = r.rounds
	}
	k := len(r.sides)
	built := make([]contender, k)
	closeAll := func() {
		for _, c := range built {
			if c.close != nil {
				c.close()
			}
		}
	}
	every := make([]int, k)
	perSlice := max(p.samples/max(p.rounds, 1), 1)
	if r.fixed > 0 {
		for i := range every {
			every[i] = max(r.every, r.fixed/perSlice)
		}
	} else {
		for i, s := range r.sides {
			c, err := s.build(callers)
			if err != nil {
				closeAll()
				return level{}, fmt.Errorf("%s: %w", s.name, err)
			}
			built[i] = c
		}
		defer closeAll()
		// Warm up, and learn how often to time a call so the samples
		// spread over the whole slice rather than its first moments.
		for i, s := range r.sides {
			say(fmt.Sprintf("%s %s callers=%d %s warm-up", r.suite, r.name, callers, s.name))
			runtime.GC()
			w := runSlice(built[i], callers, p.slice/2, 0, r.batch, math.MaxInt, 0, false)
			expect := float64(w.ops) * 2
			every[i] = max(r.every, int(expect/float64(perSlice)))
		}
	}

	runs := make([][]slice, k)
	for round := range p.rounds {
		for j := range k {
			i := (j + round) % k
			s := r.sides[i]
			say(fmt.Sprintf("%s %s callers=%d %s round %d/%d", r.suite, r.name, callers, s.name, round+1, p.rounds))
			c := built[i]
			if r.fixed > 0 {
				var err error
				if c, err = s.build(callers); err != nil {
					return level{}, fmt.Errorf("%s: %w", s.name, err)
				}
			}
			runtime.GC()
			sl := runSlice(c, callers, p.slice, r.fixed, r.batch, every[i], perSlice, r.heap)
			if r.fixed > 0 && c.close != nil {
				c.close()
			}
			runs[i] = append(runs[i], sl)
		}
	}

	lv := level{callers: callers}
	for i, s := range r.sides {
		m := summarise(s, runs[i])
		if r.count == countOpened && built[i].count != nil {
			m.total = float64(built[i].count())
		}
		lv.sides = append(lv.sides, m)
	}
	return lv, nil
}

// summarise folds one side's slices into its result: the median round for
// times and counts, every sample for the latencies, every operation for
// the allocations.
func summarise(s side, sl []slice) measured {
	m := measured{side: s.name, ours: s.ours}
	var ops int64
	var mallocs uint64
	var lat, counts, extras, cpus, perOps, heaps []float64
	for _, x := range sl {
		if x.ops == 0 {
			continue
		}
		m.rounds = append(m.rounds, float64(x.elapsed.Nanoseconds())/float64(x.ops))
		ops += x.ops
		mallocs += x.mallocs
		lat = append(lat, x.lat...)
		counts = append(counts, float64(x.count))
		extras = append(extras, float64(x.extra))
		cpus = append(cpus, float64(x.cpu))
		perOps = append(perOps, float64(x.ops))
		heaps = append(heaps, float64(x.heap)/float64(x.ops))
		m.errs += x.errs
	}
	m.ns = median(m.rounds)
	if ops > 0 {
		m.allocs = float64(mallocs) / float64(ops)
	}
	slices.Sort(lat)
	m.samples = len(lat)
	m.p50 = quantile(lat, 0.50)
	m.p99 = quantile(lat, 0.99)
	m.p999 = quantile(lat, 0.999)
	m.count = median(counts)
	m.extra = median(extras)
	m.cpu = median(cpus)
	m.ops = median(perOps)
	m.heap = median(heaps)
	return m
}

// median of xs, NaN for none. xs is not changed.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// quantile of sorted xs (nearest rank), NaN for none.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// tally is a running count that callers on many processors add to at
// once: a cell per stripe, each on a cache line of its own, picked by
// where the adding goroutine's stack is. A single shared counter, added
// to after every few calls inside the timed region, would charge each
// side a cache line moving between processors, and the faster the side
// the more often.
type tally struct {
	cells [16]struct {
		n atomic.Int64
		_ [56]byte
	}
}

// Add adds n to the cell of the calling goroutine.
func (t *tally) Add(n int64) {
	var mark byte
	h := uintptr(unsafe.Pointer(&mark)) >> 12
	t.cells[(h^h>>3)&15].n.Add(n)
}

// Load is the count: the sum of the cells.
func (t *tally) Load() int64 {
	var n int64
	for i := range t.cells {
		n += t.cells[i].n.Load()
	}
	return n
}
