package main

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"golang.org/x/time/rate"
)

// Each key earns a token every hundred seconds and holds ten, so no key
// is full again, and so forgotten, while a row runs: the memory measured
// is what a key costs while it is held.
const (
	keyedRate  = 0.01
	keyedBurst = 10
)

// keyedRows are the Keyed suite: one Allow for each of cfg.keys distinct
// keys, every call a key not seen before, on a limiter that starts empty.
// The row reports ns per call and the live heap grown per key.
//
// The other side is what a server author writes without us: a map from
// key to *rate.Limiter behind a mutex, a limiter made on a key's first
// call. It never forgets a key; moonpool's forgets one once its bucket is
// full again.
func keyedRows(eng *engine.Engine, cfg config) []row {
	// The keys are made when the suite first runs, not before, so the
	// other suites do not carry a million strings through their GCs.
	keys := sync.OnceValue(func() []string { return clientKeys(cfg.keys) })
	return []row{{
		suite:   "Keyed",
		name:    keyedNewRow(cfg),
		callers: cfg.keyedCallers,
		sides: []side{
			{name: "moonpool", ours: true, build: func(int) (contender, error) { return oursKeyed(eng, keys()) }},
			{name: "map+rate", build: func(int) (contender, error) { return theirKeyed(keys()), nil }},
		},
		batch:  1,
		every:  64,
		fixed:  cfg.keys,
		heap:   true,
		rounds: cfg.keyedRounds,
		count:  countAllowed,
	}, {
		suite:   "Keyed",
		name:    keyedHotRow,
		callers: cfg.callers,
		sides: []side{
			{name: "moonpool", ours: true, build: func(int) (contender, error) { return oursHot(eng) }},
			{name: "map+rate", build: func(int) (contender, error) { return theirHot(), nil }},
		},
		batch: 4,
		every: 16,
		count: countAllowed,
	}}
}

// keyedNewRow names the row of new keys; keyedHotRow the row where every
// caller asks for one key, on a limit as open as the Rate suite's (every
// call let through), among a thousand others made before the row starts.
func keyedNewRow(cfg config) string { return "Allow, " + strconv.Itoa(cfg.keys) + " keys" }

const keyedHotRow = "Allow, 1 hot key"

// hotKeys are the keys the hot row's limiters hold before it runs.
var hotKeys = sync.OnceValue(func() []string { return clientKeys(1000) })

// clientKeys are n distinct keys: client-0, client-1, and so on.
func clientKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	return keys
}

// oursHot is a client.KeyedBucket; every call asks for the same key.
func oursHot(eng *engine.Engine) (contender, error) {
	k, err := client.NewKeyedBucket(eng, rateLimit, rateBurst)
	if err != nil {
		return contender{}, err
	}
	for _, key := range hotKeys() {
		k.Allow(key)
	}
	return allowing(func() bool { return k.Allow("client-7") }, func() { closeWithin(k.Close) }), nil
}

// theirHot is the map of x/time/rate Limiters behind a mutex, holding the
// same keys; every call asks for the same key.
func theirHot() contender {
	var mu sync.Mutex
	m := make(map[string]*rate.Limiter)
	for _, key := range hotKeys() {
		m[key] = rate.NewLimiter(rateLimit, rateBurst)
	}
	return allowing(func() bool {
		mu.Lock()
		l := m["client-7"]
		mu.Unlock()
		return l.Allow()
	}, func() {})
}

// oursKeyed is a client.KeyedBucket; each call takes the next key.
func oursKeyed(eng *engine.Engine, keys []string) (contender, error) {
	k, err := client.NewKeyedBucket(eng, keyedRate, keyedBurst)
	if err != nil {
		return contender{}, err
	}
	var next, allowed atomic.Int64
	return contender{
		run: func(n int) {
			a := 0
			for range n {
				if k.Allow(keys[next.Add(1)-1]) {
					a++
				}
			}
			allowed.Add(int64(a))
		},
		close: func() { closeWithin(k.Close) },
		count: allowed.Load,
	}, nil
}

// theirKeyed is a map of x/time/rate Limiters behind a mutex; each call
// takes the next key.
func theirKeyed(keys []string) contender {
	var mu sync.Mutex
	m := make(map[string]*rate.Limiter)
	var next, allowed atomic.Int64
	return contender{
		run: func(n int) {
			a := 0
			for range n {
				key := keys[next.Add(1)-1]
				mu.Lock()
				l := m[key]
				if l == nil {
					l = rate.NewLimiter(keyedRate, keyedBurst)
					m[key] = l
				}
				mu.Unlock()
				if l.Allow() {
					a++
				}
			}
			allowed.Add(int64(a))
		},
		close: func() {
			mu.Lock()
			clear(m)
			mu.Unlock()
		},
		count: allowed.Load,
	}
}
