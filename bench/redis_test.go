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
		}
		keys = nil
	}
}
