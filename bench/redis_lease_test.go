package main

import (
	"testing"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/internal/redistest"
)

// TestLeasedSideAgrees runs both sides of the leased row on its hot key:
// each lets every call through, and the leased side sends Redis a small
// part of the commands redis_rate sends, so the times compare the same
// answers at different costs.
func TestLeasedSideAgrees(t *testing.T) {
	srv := redistest.New(t)
	eng := engine.New()
	defer eng.Shutdown(t.Context())
	keys := clientKeys(1)
	var cmds [2]int64
	for i, build := range []func() (contender, error){
		func() (contender, error) {
			return oursRedis(eng, srv.Addr(), 8, "lease:ours:", keys, redisOpen, benchLease)
		},
		func() (contender, error) { return theirRedis(srv.Addr(), 8, "lease:theirs:", keys, redisOpen), nil },
	} {
		c, err := build()
		if err != nil {
			t.Fatal(err)
		}
		sl := runSlice(c, 8, 0, 2000, 1, 10, 100, false)
		c.close()
		if admitted := c.extra(); admitted != 2000 || sl.errs != 0 {
			t.Errorf("side %d: admitted %d of 2000 (%d failed), want all", i, admitted, sl.errs)
		}
		cmds[i] = sl.count
	}
	if cmds[0] < 1 || cmds[0]*20 > cmds[1] {
		t.Errorf("the leased side sent %d commands for 2,000 calls, redis_rate %d: want under a twentieth", cmds[0], cmds[1])
	}
}
