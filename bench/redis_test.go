package main

import (
	"testing"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/redistest"
)

// TestRedisSidesAgree runs both sides of the Redis suite on one hot key
// and on many: each lets through exactly what the same limit allows, so
// the times compare the same work.
func TestRedisSidesAgree(t *testing.T) {
	srv := redistest.New(t)
	eng := engine.New()
	defer eng.Shutdown(t.Context())
	for _, keys := range [][]string{{"hot"}, {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}} {
		for i, build := range []func() (contender, error){
			func() (contender, error) { return oursRedis(eng, srv.Addr(), 8, "agree:ours:", keys, redisTight, 0) },
			func() (contender, error) { return theirRedis(srv.Addr(), 8, "agree:theirs:", keys, redisTight), nil },
		} {
			c, err := build()
			if err != nil {
				t.Fatal(err)
			}
			sl := runSlice(c, 8, 0, 300, 1, 10, 100, false)
			c.close()
			// A burst of 100 a key, and a token a second more: the run
			// takes well under a second.
			most := int64(min(300, int(redisTight.burst)*len(keys)))
			admitted := c.extra()
			if admitted < most || admitted > most+int64(len(keys)) || sl.errs != 0 {
				t.Errorf("side %d, %d keys: admitted %d of 300 (%d failed), want %d", i, len(keys), admitted, sl.errs, most)
			}
			if sl.count < 1 {
				t.Errorf("side %d: counted no Redis command", i)
			}
			if sl.cpu <= 0 {
				t.Errorf("side %d: redis-server's CPU time did not move over 300 calls (%d µs)", i, sl.cpu)
			}
		}
		keys = nil
	}
}

// TestParseCPU reads redis-server's own CPU time from INFO cpu, user and
// system, and not its children's (a fork that saves to disk).
func TestParseCPU(t *testing.T) {
	for _, c := range []struct {
		info string
		want int64
	}{
		{"# CPU\r\nused_cpu_sys:1.234567\r\nused_cpu_user:2.000001\r\nused_cpu_sys_children:9.000000\r\nused_cpu_user_children:9.000000\r\nused_cpu_sys_main_thread:1.200000\r\nused_cpu_user_main_thread:1.900000\r\n", 3234568},
		{"used_cpu_user:0.5\nused_cpu_sys:0.25\n", 750000},
		{"", 0},
		{"used_cpu_user:x\r\n", 0},
	} {
		if got := parseCPU(c.info); got != c.want {
			t.Errorf("parseCPU(%q) = %d, want %d", c.info, got, c.want)
		}
	}
}
