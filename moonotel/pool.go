package moonotel

import (
	"context"
	"errors"
	"reflect"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/policy"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the instrumentation scope the instruments are made under.
const ScopeName = "github.com/moonpool-go/moonpool/moonotel"

// Attribute keys of the semantic conventions.
const (
	poolNameKey = attribute.Key("db.client.connection.pool.name")
	stateKey    = attribute.Key("db.client.connection.state")
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
// limits are the pool's PoolConfig.Limits, which its Stats do not carry:
// a Size above zero is reported as db.client.connection.max and an Idle
// above zero as db.client.connection.idle.max; a zero (no limit) is left
// out, since no number would be true.
//
// The instruments:
//   - db.client.connection.count {connection}: state idle is Idle, state
//     used is Busy (lent, or being opened: room the pool has given away).
//   - db.client.connection.max, db.client.connection.idle.max {connection}:
//     from limits, as above.
//   - db.client.connection.pending_requests {request}: Gets waiting in line.
//   - db.client.connection.timeouts {timeout}: Gets whose ctx ended while
//     in line (cancelled or past its deadline), and Gets refused at once
//     because the ward's hold would outlast their deadline.
//   - moonpool.pool.waits {request} and moonpool.pool.wait_time (s): Gets
//     that waited in line and were answered, and their total time in line.
//
// It returns an error for a nil provider or pool, or if the meter refuses
// an instrument or the callback; nothing is registered then.
func ObservePool(provider metric.MeterProvider, pool Pool, name string, limits policy.Limits) (metric.Registration, error) {
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
	count := upDown("db.client.connection.count", "{connection}", "The number of connections that are currently in state described by the state attribute.")
	pending := upDown("db.client.connection.pending_requests", "{request}", "The number of current pending requests for an open connection.")
	timeouts := counter("db.client.connection.timeouts", "{timeout}", "The number of connection timeouts that have occurred trying to obtain a connection from the pool.")
	waits := counter("moonpool.pool.waits", "{request}", "The number of Gets that waited in line for a resource and were answered.")
	waitTime, err := meter.Float64ObservableCounter("moonpool.pool.wait_time", metric.WithUnit("s"), metric.WithDescription("The total time Gets spent waiting in line for a resource."))
	errs = append(errs, err)
	instruments := []metric.Observable{count, pending, timeouts, waits, waitTime}
	var maxLive, maxIdle metric.Int64ObservableUpDownCounter
	if limits.Size > 0 {
		maxLive = upDown("db.client.connection.max", "{connection}", "The maximum number of open connections allowed.")
		instruments = append(instruments, maxLive)
	}
	if limits.Idle > 0 {
		maxIdle = upDown("db.client.connection.idle.max", "{connection}", "The maximum number of idle open connections allowed.")
		instruments = append(instruments, maxIdle)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	// The attribute sets are made once, so a collection allocates none.
	named := metric.WithAttributeSet(attribute.NewSet(poolNameKey.String(name)))
	idle := metric.WithAttributeSet(attribute.NewSet(poolNameKey.String(name), stateKey.String("idle")))
	used := metric.WithAttributeSet(attribute.NewSet(poolNameKey.String(name), stateKey.String("used")))
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := pool.Stats()
		o.ObserveInt64(count, int64(s.Idle()), idle)
		o.ObserveInt64(count, int64(s.Busy()), used)
		o.ObserveInt64(pending, int64(s.Waiting()), named)
		o.ObserveInt64(timeouts, s.Cancelled()+s.HeldPastDeadline(), named)
		o.ObserveInt64(waits, s.Waited(), named)
		o.ObserveFloat64(waitTime, s.WaitTime().Seconds(), named)
		if maxLive != nil {
			o.ObserveInt64(maxLive, int64(limits.Size), named)
		}
		if maxIdle != nil {
			o.ObserveInt64(maxIdle, int64(limits.Idle), named)
		}
		return nil
	}, instruments...)
}

// isNil says whether v is nil or a nil pointer in an interface, which would
// panic on its first call, in a callback on the SDK's goroutine.
func isNil(v any) bool {
	r := reflect.ValueOf(v)
	return !r.IsValid() || r.Kind() == reflect.Pointer && r.IsNil()
}
