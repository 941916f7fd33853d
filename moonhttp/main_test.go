package moonhttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// rig is an engine on a virtual clock, for tests that need exact waits and
// exact header values.
type rig struct {
	t     *testing.T
	clock *vclock.Virtual
	eng   *client.Engine
	t0    int64
}

func newRig(t *testing.T) *rig {
	t.Helper()
	clock := vclock.NewVirtual()
	eng := client.NewEngine(client.WithClock(clock))
	t.Cleanup(func() { _ = eng.Shutdown(context.Background()) })
	return &rig{t: t, clock: clock, eng: eng, t0: clock.Now()}
}

// at is how far the clock has moved since the rig was made.
func (r *rig) at() time.Duration { return time.Duration(r.clock.Now() - r.t0) }

// drive runs f on a goroutine and, whenever a timer is pending, moves the
// clock to it, until f returns. It returns how far each move went, in
// order: the sleeps f's code took on the engine's clock.
func (r *rig) drive(f func()) []time.Duration {
	r.t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	limit, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var moves []time.Duration
	for {
		waiting, stop := context.WithCancel(limit)
		pend := make(chan error, 1)
		go func() { pend <- r.clock.WaitPending(waiting, 1) }()
		select {
		case <-done:
			stop()
			<-pend
			return moves
		case err := <-pend:
			stop()
			if err != nil {
				r.t.Fatalf("the call neither returned nor waited: %v", err)
			}
			d, _ := r.clock.AdvanceNext()
			moves = append(moves, d)
		}
	}
}

// serve starts h on a test server and returns it with a client of its own;
// both are closed when the test ends.
func serve(t *testing.T, h http.Handler) (*httptest.Server, *http.Client) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, srv.Client()
}
