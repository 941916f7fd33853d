package moonredis

import (
	"context"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/redis/go-redis/v9"
)

// answered is a client whose every script call is answered at once, with
// one grant, without a server: what is left to count is the limiter's
// own work.
func answered(t *testing.T) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	rdb.AddHook(hook{process: func(next redis.ProcessHook) redis.ProcessHook {
		return func(ctx context.Context, cmd redis.Cmder) error {
			cmd.(*redis.Cmd).SetVal([]any{int64(1), int64(0), int64(99000)})
			return nil
		}
	}})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// TestAllowAllocations: an Allow whose key has no call in flight costs
// no allocation beyond those of the script call it makes (its Redis key,
// and go-redis's own). Its ctx is shared with the calls begun near it
// (see spans), and the call's flight, the largest allocation of a call,
// is taken again from the last call that ended.
func TestAllowAllocations(t *testing.T) {
	rdb := answered(t)
	eng := engine.New()
	t.Cleanup(func() { eng.Shutdown(context.Background()) })
	b, err := NewBucket(eng, Config{Client: rdb, Timeout: 5 * time.Second}, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	key := "k"
	var keys [1]string
	args := []any{b.l.id, "x.1", b.l.a, b.l.b, b.l.keep, 1, 0, 0}
	alone := testing.AllocsPerRun(200, func() {
		keys[0] = b.l.cfg.Prefix + key
		bucketScript.Run(context.Background(), rdb, keys[:], args...).Result()
	})
	allow := testing.AllocsPerRun(200, func() {
		if !b.Allow(key) {
			t.Fatal("Allow refused a grant")
		}
	})
	if allow > alone {
		t.Errorf("Allow costs %v allocations, the script call alone %v: want no more", allow, alone)
	}
}
