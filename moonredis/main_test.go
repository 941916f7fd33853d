package moonredis

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/moontest"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
	case "outage":
		os.Exit(outageChild())
	case "fleet":
		os.Exit(fleetChild())
	default:
		os.Exit(child())
	}
	redis.SetLogger(quiet{}) // a dead Redis is what some tests are about
	// go-redis retries a failed dial on a goroutine of its own that
	// sleeps a second between tries and sees the client closed only then.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// fake is an engine on a virtual clock and a miniredis whose TIME and TTLs
// follow that clock: moving it moves both.
type fake struct {
	clock *moontest.Clock
	eng   *engine.Engine
	mr    *miniredis.Miniredis
	rdb   *redis.Client
}

func newFake(t *testing.T) *fake {
	t.Helper()
	f := &fake{clock: moontest.NewClock(t)}
	f.eng = engine.New(engine.WithClock(f.clock))
	f.mr = miniredis.RunT(t)
	f.mr.SetTime(time.Unix(0, f.clock.Now()))
	f.rdb = redis.NewClient(&redis.Options{Addr: f.mr.Addr()})
	t.Cleanup(func() {
		f.rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f.eng.Shutdown(ctx); err != nil {
			t.Errorf("engine shutdown: %v", err)
		}
	})
	return f
}

// advance moves the engine's clock and Redis's together.
func (f *fake) advance(d time.Duration) {
	f.clock.Advance(d)
	f.mr.SetTime(time.Unix(0, f.clock.Now()))
	f.mr.FastForward(d)
}

// cfg is a Config on the fake's Redis.
func (f *fake) cfg() Config { return Config{Client: f.rdb, Timeout: 5 * time.Second} }

// quiet is a go-redis logger that prints nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
