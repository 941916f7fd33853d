package moonotel

import (
	"context"
	"errors"
	"reflect"

	"github.com/moonpool-go/moonpool/client"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the instrumentation scope the instruments are made under.
const ScopeName = "github.com/moonpool-go/moonpool/moonotel"

// Attribute keys of the semantic conventions, and moonpool's own.
const (
	poolNameKey    = attribute.Key("db.client.connection.pool.name")
	stateKey       = attribute.Key("db.client.connection.state")
	closeReasonKey = attribute.Key("moonpool.pool.close.reason")
)

// Pool is what the instruments read: any *client.Pool, whatever it holds.
type Pool interface {
	Stats() client.Stats
}

// ObservePool reports pool under name (the value of
// db.client.connection.pool.name, which should be unique in the program)
// through a meter of provider, until the returned Registration is
// unregistered. It never blocks; each collection asks the pool for one
// Stats snapshot, a round trip to its actor. After the pool is closed the
// instruments report it as Close left it: unregister then.
//
// db.client.connection.max, .idle.max and .idle.min are Stats.Max,
// MaxIdle and MinIdle, read at each collection, so they follow SetLimits.
// max and idle.max are left out while the pool has no such limit, since no
// number would be true.
//
// The instruments:
//   - db.client.connection.count {connection}: state idle is Idle, state
//     used is Busy (lent, or being opened: room the pool has given away).
//   - db.client.connection.max, db.client.connection.idle.max and
//     db.client.connection.idle.min {connection}: as above.
//   - db.client.connection.pending_requests {request}: Gets waiting in line.
//   - db.client.connection.timeouts {timeout}: Gets whose ctx ended while
//     in line (cancelled or past its deadline), and Gets refused at once
//     because the ward's hold would outlast their deadline.
//   - moonpool.pool.gets and moonpool.pool.empty_gets {request}, and
//     moonpool.pool.get_time (s): Gets, those that found nothing idle, and
//     the time Gets spent waiting in line, opening and checking.
//   - moonpool.pool.waits {request} and moonpool.pool.wait_time (s): Gets
//     that waited in line and were answered, and their total time in line.
//   - moonpool.pool.closes {connection}: resources the pool let go, by
//     moonpool.pool.close.reason: stale, evicted, surplus, broken,
//     unreused, check_failed, outdated or shutdown. The reasons add up to
//     Stats.Closes.
//   - moonpool.pool.resets {reset}: calls of Reset on the open pool.
//   - moonpool.pool.leaked {connection}: loans reported past
//     PoolConfig.LeakAfter.
//
// It returns an error for a nil provider or pool, or if the meter refuses
// an instrument or the callback; nothing is registered then.
func ObservePool(provider metric.MeterProvider, pool Pool, name string) (metric.Registration, error) {
	if isNil(provider) {
		return nil, errors.New("moonpool: moonotel.ObservePool: nil MeterProvider")
	}
	if isNil(pool) {
		return nil, errors.New("moonpool: moonotel.ObservePool: nil pool")
	}
	meter := provider.Meter(ScopeName)
	var errs []error
	upDown := func(name, unit, desc string) metric.Int64ObservableUpDownCounter {
		c, err := meter.Int64ObservableUpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, err := meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	seconds := func(name, desc string) metric.Float64ObservableCounter {
		c, err := meter.Float64ObservableCounter(name, metric.WithUnit("s"), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	count := upDown("db.client.connection.count", "{connection}", "The number of connections that are currently in state described by the state attribute.")
	maxLive := upDown("db.client.connection.max", "{connection}", "The maximum number of open connections allowed.")
	maxIdle := upDown("db.client.connection.idle.max", "{connection}", "The maximum number of idle open connections allowed.")
	minIdle := upDown("db.client.connection.idle.min", "{connection}", "The minimum number of idle open connections allowed.")
	pending := upDown("db.client.connection.pending_requests", "{request}", "The number of current pending requests for an open connection.")
	timeouts := counter("db.client.connection.timeouts", "{timeout}", "The number of connection timeouts that have occurred trying to obtain a connection from the pool.")
	gets := counter("moonpool.pool.gets", "{request}", "The number of Gets that asked the pool for a resource.")
	emptyGets := counter("moonpool.pool.empty_gets", "{request}", "The number of Gets that found nothing idle and waited in line or opened a resource.")
	getTime := seconds("moonpool.pool.get_time", "The total time Gets spent waiting in line, opening and checking.")
	waits := counter("moonpool.pool.waits", "{request}", "The number of Gets that waited in line for a resource and were answered.")
	waitTime := seconds("moonpool.pool.wait_time", "The total time Gets spent waiting in line for a resource.")
	closes := counter("moonpool.pool.closes", "{connection}", "The number of resources the pool let go, by the reason in moonpool.pool.close.reason.")
	resets := counter("moonpool.pool.resets", "{reset}", "The number of calls of Reset on the open pool.")
	leaked := counter("moonpool.pool.leaked", "{connection}", "The number of resources reported lent for longer than LeakAfter.")
	instruments := []metric.Observable{count, maxLive, maxIdle, minIdle, pending, timeouts, gets, emptyGets, getTime, waits, waitTime, closes, resets, leaked}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	// The attribute sets are made once, so a collection allocates none.
	named := metric.WithAttributeSet(attribute.NewSet(poolNameKey.String(name)))
	idle := metric.WithAttributeSet(attribute.NewSet(poolNameKey.String(name), stateKey.String("idle")))
	used := metric.WithAttributeSet(attribute.NewSet(poolNameKey.String(name), stateKey.String("used")))
	reason := func(why string) metric.ObserveOption {
		return metric.WithAttributeSet(attribute.NewSet(poolNameKey.String(name), closeReasonKey.String(why)))
	}
	stale, evicted, surplus, broken := reason("stale"), reason("evicted"), reason("surplus"), reason("broken")
	unreused, checkFailed, outdated, shutdown := reason("unreused"), reason("check_failed"), reason("outdated"), reason("shutdown")
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := pool.Stats()
		o.ObserveInt64(count, int64(s.Idle), idle)
		o.ObserveInt64(count, int64(s.Busy), used)
		if s.Max > 0 {
			o.ObserveInt64(maxLive, int64(s.Max), named)
		}
		if s.MaxIdle > 0 {
			o.ObserveInt64(maxIdle, int64(s.MaxIdle), named)
		}
		o.ObserveInt64(minIdle, int64(s.MinIdle), named)
		o.ObserveInt64(pending, int64(s.Waiting), named)
		o.ObserveInt64(timeouts, s.Cancelled+s.HeldPastDeadline, named)
		o.ObserveInt64(gets, s.Gets, named)
		o.ObserveInt64(emptyGets, s.EmptyGets, named)
		o.ObserveFloat64(getTime, s.GetTime.Seconds(), named)
		o.ObserveInt64(waits, s.Waited, named)
		o.ObserveFloat64(waitTime, s.WaitTime.Seconds(), named)
		o.ObserveInt64(closes, s.Stale, stale)
		o.ObserveInt64(closes, s.Evicted, evicted)
		o.ObserveInt64(closes, s.Surplus, surplus)
		o.ObserveInt64(closes, s.Broken, broken)
		o.ObserveInt64(closes, s.Unreused, unreused)
		o.ObserveInt64(closes, s.CheckFailures, checkFailed)
		o.ObserveInt64(closes, s.Outdated, outdated)
		o.ObserveInt64(closes, s.Shutdown, shutdown)
		o.ObserveInt64(resets, s.Resets, named)
		o.ObserveInt64(leaked, s.Leaked, named)
		return nil
	}, instruments...)
}

// isNil says whether v is nil or a nil pointer in an interface, which would
// panic on its first call, in a callback on the SDK's goroutine.
func isNil(v any) bool {
	r := reflect.ValueOf(v)
	return !r.IsValid() || r.Kind() == reflect.Pointer && r.IsNil()
}
