package moonredis

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// realEngine is an engine on the real clock, shut down when t ends.
func realEngine(t *testing.T) *engine.Engine {
	eng := engine.New()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := eng.Shutdown(ctx); err != nil {
			t.Errorf("engine shutdown: %v", err)
		}
	})
	return eng
}

func realClient(t *testing.T, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// TestProcessesShareOneQuota: four processes (this test binary, run
// again) take from one window quota and one bucket in a real redis-server
// under random arrivals, 3,840 requests for a quota of 500 each; between
// them they are let through exactly 500 of each.
func TestProcessesShareOneQuota(t *testing.T) {
	srv := redistest.New(t)
	const procs, quota = 4, 500
	prefix := fmt.Sprintf("test:%d:", time.Now().UnixNano())
	outs := make([]bytes.Buffer, procs)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // ends a process that hangs
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, procs)
	for i := range procs {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=1", "MOONREDIS_ADDR="+srv.Addr(), "MOONREDIS_PREFIX="+prefix,
			fmt.Sprintf("MOONREDIS_QUOTA=%d", quota), fmt.Sprintf("MOONREDIS_SEED=%d", i+1))
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = cmd.Run() }()
	}
	wg.Wait()
	var window, bucket int
	for i := range procs {
		if errs[i] != nil {
			t.Fatalf("process %d: %v\n%s", i, errs[i], outs[i].String())
		}
		var w, b, failed int
		if _, err := fmt.Sscanf(outs[i].String(), "admitted %d %d %d", &w, &b, &failed); err != nil {
			t.Fatalf("process %d said %q", i, outs[i].String())
		}
		if failed != 0 {
			t.Fatalf("process %d: %d requests answered without Redis", i, failed)
		}
		t.Logf("process %d: window %d, bucket %d", i, w, b)
		window += w
		bucket += b
	}
	if window != quota || bucket != quota {
		t.Errorf("the processes were let through %d by the window and %d by the bucket, want exactly %d each", window, bucket, quota)
	}
}

// TestRedisKilledAndRestarted: callers keep calling while redis-server is
// killed and started again; nothing hangs, the FailMode answers while it is
// gone (nothing let through when closed, everything when open, the local
// share when local), and Redis answers again once it is back.
func TestRedisKilledAndRestarted(t *testing.T) {
	for _, mode := range []FailMode{FailClosed, FailOpen, FailLocal} {
		t.Run(mode.String(), func(t *testing.T) {
			srv := redistest.New(t)
			eng := realEngine(t)
			cfg := Config{Client: realClient(t, srv.Addr()), Timeout: 100 * time.Millisecond, FailMode: mode, ExpectedProcesses: 2}
			b, err := NewBucket(eng, cfg, 1e6, 1e6)
			if err != nil {
				t.Fatal(err)
			}
			// Callers that never stop, on many keys, Allow and Wait.
			stop := make(chan struct{})
			var calls atomic.Int64
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						key := fmt.Sprint("k", g, i%50)
						if g%2 == 0 {
							b.Allow(key)
						} else {
							ctx, cancel := context.WithTimeout(context.Background(), time.Second)
							b.Wait(ctx, key)
							cancel()
						}
						calls.Add(1)
					}
				}()
			}
			progress := func(what string) {
				t.Helper()
				from := calls.Load()
				deadline := time.After(20 * time.Second)
				for calls.Load() < from+200 {
					select {
					case <-deadline:
						t.Fatalf("%s: callers hang (%d calls in 20s)", what, calls.Load()-from)
					case <-time.After(5 * time.Millisecond):
					}
				}
			}
			progress("Redis up")
			srv.Kill()
			progress("Redis killed")
			for i := range 20 {
				if got := b.Allow(fmt.Sprint("probe", i)); got != (mode != FailClosed) {
					t.Fatalf("with Redis gone, %v answered Allow %v", mode, got)
				}
			}
			if err := b.Wait(context.Background(), "probe"); (mode == FailClosed) != (err != nil) {
				t.Fatalf("with Redis gone, %v answered Wait %v", mode, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := srv.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			before := b.Stats().Admitted
			for b.Stats().Admitted == before {
				select {
				case <-ctx.Done():
					t.Fatal("Redis back, but nothing admitted by it")
				case <-time.After(5 * time.Millisecond):
				}
			}
			progress("Redis back")
			close(stop)
			waitGroup(t, &wg, "callers after stop")
			if st := b.Stats(); st.Fallbacks == 0 || st.Failures == 0 {
				t.Errorf("Stats = %+v: no call failed while Redis was gone", st)
			}
		})
	}
}

// TestRealDroppedReply: on a real redis-server, a reply dropped on the
// network and the command sent again by go-redis take one token.
func TestRealDroppedReply(t *testing.T) {
	srv := redistest.New(t)
	p := redistest.NewProxy(t, srv.Addr())
	b, err := NewBucket(realEngine(t), Config{Client: realClient(t, p.Addr()), Timeout: 5 * time.Second}, 1e-6, 5)
	if err != nil {
		t.Fatal(err)
	}
	b.Allow("warm")
	p.DropNext(1)
	if !b.Allow("k") {
		t.Fatal("Allow refused")
	}
	if p.Dropped() != 1 {
		t.Fatalf("dropped %d replies, want 1", p.Dropped())
	}
	if got := b.Tokens("k"); got != 4 {
		t.Errorf("%v tokens left after one Allow whose reply was dropped, want 4", got)
	}
}

var _ client.KeyedLimiter = (*Window)(nil)
