package moonredis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/redis/go-redis/v9"
)

// childEnv, when set, makes the test binary a child process of
// TestProcessesShareOneQuota instead of running tests: it takes from one
// quota in Redis under random arrivals and prints what it was let through.
const childEnv = "MOONREDIS_CHILD"

// child is the child's whole run; its exit code is the test binary's.
func child() int {
	addr, prefix := os.Getenv("MOONREDIS_ADDR"), os.Getenv("MOONREDIS_PREFIX")
	quota, _ := strconv.Atoi(os.Getenv("MOONREDIS_QUOTA"))
	seed, _ := strconv.ParseUint(os.Getenv("MOONREDIS_SEED"), 10, 64)
	eng := engine.New()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	cfg := Config{Client: rdb, Timeout: 5 * time.Second}
	cfg.Prefix = prefix + "w:"
	w, err := NewWindow(eng, cfg, quota, time.Hour)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg.Prefix = prefix + "b:"
	b, err := NewBucket(eng, cfg, 1.0/3600, float64(quota)) // refills nothing in a run
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var byWindow, byBucket, failed atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(g)))
			for range 120 {
				// Random arrivals: a pause of up to half a millisecond.
				time.Sleep(time.Duration(r.IntN(500)) * time.Microsecond)
				key := "shared"
				if w.Allow(key) {
					byWindow.Add(1)
				}
				if b.Allow(key) {
					byBucket.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if st := w.Stats(); st.Fallbacks > 0 {
		failed.Add(st.Fallbacks)
	}
	if st := b.Stats(); st.Fallbacks > 0 {
		failed.Add(st.Fallbacks)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	eng.Shutdown(ctx)
	fmt.Printf("admitted %d %d %d\n", byWindow.Load(), byBucket.Load(), failed.Load())
	return 0
}
