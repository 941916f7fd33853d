package moonotel

import (
	"context"
	"errors"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// limiterNameKey is the attribute naming a limiter.
const limiterNameKey = attribute.Key("moonpool.limiter.name")

// Limiter is what the limiter instruments read: *client.Bucket, Window,
// KeyedBucket and KeyedWindow.
type Limiter interface {
	Stats() client.LimiterStats
}

// quoter is a limiter that says its quota now, as every client limiter
// does.
type quoter interface {
	Quota() (q int, w time.Duration)
}

// ObserveLimiter reports l under name (the value of moonpool.limiter.name,
// which should be unique in the program) through a meter of provider,
// until the returned Registration is unregistered. It never blocks, and a
// collection reads one Stats snapshot, which asks nothing of the limiter's
// actor: instrumenting a limiter costs its Allow nothing beyond the counts
// it keeps anyway.
//
// The instruments (see client.LimiterStats for each figure):
//   - moonpool.limiter.allowed and moonpool.limiter.refused {request}:
//     requests allowed, and refused (Waits that ended without their tokens
//     among them);
//   - moonpool.limiter.waits {request} and moonpool.limiter.wait_time (s):
//     Waits granted after waiting in line, and their time there;
//   - moonpool.limiter.quota {request} and moonpool.limiter.quota.window
//     (s): the quota now, q requests per w (see client.Bucket.Quota),
//     which follow a retune; left out for a Limiter without a Quota method.
//
// It returns an error for a nil provider or limiter, or if the meter
// refuses an instrument or the callback; nothing is registered then.
func ObserveLimiter(provider metric.MeterProvider, l Limiter, name string) (metric.Registration, error) {
	if isNil(provider) {
		return nil, errors.New("moonpool: moonotel.ObserveLimiter: nil MeterProvider")
	}
	if isNil(l) {
		return nil, errors.New("moonpool: moonotel.ObserveLimiter: nil limiter")
	}
	meter := provider.Meter(ScopeName)
	var errs []error
	counter := func(name, desc string) metric.Int64ObservableCounter {
		c, err := meter.Int64ObservableCounter(name, metric.WithUnit("{request}"), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	allowed := counter("moonpool.limiter.allowed", "The number of requests the limiter allowed.")
	refused := counter("moonpool.limiter.refused", "The number of requests the limiter refused, and of Waits that ended without their tokens.")
	waits := counter("moonpool.limiter.waits", "The number of Waits granted after waiting in line.")
	waitTime, err := meter.Float64ObservableCounter("moonpool.limiter.wait_time", metric.WithUnit("s"), metric.WithDescription("The total time granted Waits spent waiting in line."))
	errs = append(errs, err)
	instruments := []metric.Observable{allowed, refused, waits, waitTime}
	q, _ := l.(quoter)
	var quota metric.Int64ObservableUpDownCounter
	var window metric.Float64ObservableGauge
	if q != nil {
		quota, err = meter.Int64ObservableUpDownCounter("moonpool.limiter.quota", metric.WithUnit("{request}"), metric.WithDescription("The number of requests the limiter allows per quota window now."))
		errs = append(errs, err)
		window, err = meter.Float64ObservableGauge("moonpool.limiter.quota.window", metric.WithUnit("s"), metric.WithDescription("The quota's window now; for a bucket, the time it takes to fill from empty."))
		errs = append(errs, err)
		instruments = append(instruments, quota, window)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	named := metric.WithAttributeSet(attribute.NewSet(limiterNameKey.String(name)))
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := l.Stats()
		o.ObserveInt64(allowed, s.Allowed, named)
		o.ObserveInt64(refused, s.Refused, named)
		o.ObserveInt64(waits, s.Waited, named)
		o.ObserveFloat64(waitTime, s.WaitTime.Seconds(), named)
		if q != nil {
			n, w := q.Quota()
			o.ObserveInt64(quota, int64(n), named)
			o.ObserveFloat64(window, w.Seconds(), named)
		}
		return nil
	}, instruments...)
}
