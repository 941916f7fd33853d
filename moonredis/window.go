package moonredis

import (
	"context"
	"fmt"
	"time"

	"github.com/moonpool-go/moonpool/client"
)

// Window is a sliding-window quota per key kept in Redis: at most allow
// events for each key in any stretch of time window long, shared by every
// process that builds one with the same Prefix and numbers. It answers as
// client.KeyedWindow does (see the package documentation for where a
// shared one must differ), and each key's concurrent requests from this
// process go to Redis together, in one call.
//
// NewWindow's is exact: a sorted set per key holds one member per event
// counted in the last window, trimmed on every call, and the key expires a
// window after its last event. Measured on Redis 7.0, a key costs about 120
// bytes an event (119 KB for allow 1,000), and about 30 while it holds 128
// or fewer, which Redis packs. NewApproxWindow's is a sliding-window
// counter: two counts per key (about 110 bytes), whatever allow is, at the
// price of the error its documentation states.
//
// It is safe for concurrent use. Build one with NewWindow or
// NewApproxWindow; the zero Window is not usable.
type Window struct {
	l     limiter
	allow int
	fb    *windowLocal // nil unless FailLocal
}

// NewWindow starts an exact sliding-window quota on eng, allow events per
// key in any stretch window long. An allow below 1 or above 1e15 or a
// window below a millisecond is refused with an error, as are a nil eng
// and a Config without a Client. It does not touch Redis.
func NewWindow(eng *client.Engine, cfg Config, allow int, window time.Duration) (*Window, error) {
	return newWindow(eng, cfg, allow, window, false)
}

// NewApproxWindow is NewWindow with a sliding-window counter in Redis: a
// count for each fixed window of the given length, and the sliding
// window's count estimated as the current fixed window's count plus the
// previous one's weighted by how much of it the sliding window still
// covers, which assumes the previous window's events were spread evenly.
//
// Its error, from that assumption alone: with events spread evenly it is
// exact; when the previous window's events bunched at its end, a stretch
// window long can hold up to twice allow (allow at the end of one fixed
// window, and nearly allow again just after it, as their weight fades);
// when they bunched at its start, it refuses while the true count is
// lower. A Wait is given only a slot in the current fixed window, where
// its event is counted, so the bound holds for waiters too; when the
// estimate has no room for it before the next fixed window begins, Wait
// returns a *client.WaitError at once, saying when the estimate would have
// room, and counts nothing.
func NewApproxWindow(eng *client.Engine, cfg Config, allow int, window time.Duration) (*Window, error) {
	return newWindow(eng, cfg, allow, window, true)
}

func newWindow(eng *client.Engine, cfg Config, allow int, window time.Duration, approx bool) (*Window, error) {
	if allow < 1 || allow > maxCount || window < time.Millisecond {
		return nil, fmt.Errorf("moonredis: NewWindow: allow %d in %v: want 1 to %v in at least 1ms", allow, window, int64(maxCount))
	}
	cfg, err := cfg.normal("window")
	if err != nil {
		return nil, err
	}
	w := &Window{allow: allow}
	w.l.cfg, w.l.script = cfg, windowScript
	if approx {
		w.l.script = counterScript
	}
	w.l.a, w.l.b = float64(window/time.Microsecond), float64(allow)
	if err := w.l.start(eng); err != nil {
		return nil, fmt.Errorf("moonredis: NewWindow: %w", err)
	}
	if cfg.FailMode == FailLocal {
		kw, err := client.NewKeyedWindow(eng, allow/cfg.ExpectedProcesses, window)
		if err != nil {
			w.l.close(context.Background(), nil)
			return nil, fmt.Errorf("moonredis: NewWindow: %w", err)
		}
		w.fb = &windowLocal{kw}
	}
	return w, nil
}

// Allow is whether an event for key fits its quota now, counting it if
// so. It blocks as long as Bucket.Allow at most. While
// callers wait for room in key's quota, in any process, it says no; after
// Close it says no. A refusal is remembered as Bucket.Allow's is.
func (w *Window) Allow(key string) bool { return w.Try(key).OK }

// Try is Allow with the whole answer for key (see client.Decision).
func (w *Window) Try(key string) client.Decision {
	if w.l.closed.Load() {
		return client.Decision{Wait: client.Never, Closed: true}
	}
	return w.l.try(key, 1, w.fb.orNil())
}

// Wait blocks until an event for key is counted for the caller, or ctx is
// done, answering as Bucket.WaitN does: Redis gives the caller the first
// instant with room after every caller already waiting for key, in any
// process, and counts its event then.
func (w *Window) Wait(ctx context.Context, key string) error {
	return w.l.wait(ctx, key, 1, w.fb.orNil())
}

// Delay is how long a caller would wait now for room in key's quota,
// behind every caller already waiting: 0 for a key not seen. It takes
// nothing. After Close it is client.Never; with Redis unavailable, the
// FailMode's, as Bucket.Delay.
func (w *Window) Delay(key string) time.Duration { return w.l.delay(key, w.fb.orNil()) }

// Left is how many more events key's quota would count now: allow for a
// key not seen, 0 while callers wait, after Close or with Redis
// unavailable.
func (w *Window) Left(key string) int {
	v, ok := w.l.look(key)
	if !ok {
		return 0
	}
	return min(whole(v.left), w.allow)
}

// Stats are the window's counts in this process.
func (w *Window) Stats() Stats { return w.l.stats.read() }

// Close stops the window's actor within ctx, as Bucket.Close.
func (w *Window) Close(ctx context.Context) error { return w.l.close(ctx, w.fb.orNil()) }

// windowLocal is FailLocal's limit for a Window.
type windowLocal struct{ *client.KeyedWindow }

func (k *windowLocal) orNil() local {
	if k == nil {
		return nil
	}
	return k
}
func (k *windowLocal) tryN(key string, _ float64) client.Decision { return k.Try(key) }
func (k *windowLocal) waitN(ctx context.Context, key string, _ float64) error {
	return k.Wait(ctx, key)
}

var _ client.KeyedLimiter = (*Window)(nil)
