package actors

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/moontest"
)

// waitLoop is 16 callers that each ask again, stamped with the clock's
// reading, as soon as they are granted: a limiter kept busy, as by 16
// callers looping on Wait. It drives the clock one timer at a time for
// span and returns the grants and the time from start to the last moment
// it looked.
func waitLoop(t *testing.T, v *moontest.Clock, ref *engine.Ref, key string, span time.Duration) (grants int, elapsed time.Duration) {
	t.Helper()
	const callers = 16
	start := v.Now()
	asks := make([]*Allow, callers)
	for i := range asks {
		asks[i] = park(ref, key, v.Now(), 1, 0)
	}
	// settle answers what can be answered now: whoever is granted asks
	// again at once, until a look finds nobody granted.
	settle := func() {
		for {
			left(ref, key, v.Now()) // a barrier: every Tick and Allow before it is handled
			again := 0
			for i, a := range asks {
				select {
				case p := <-a.Reply:
					if !p.OK {
						t.Fatalf("a parked caller was answered %+v", p)
					}
					grants++
					again++
					asks[i] = park(ref, key, v.Now(), 1, 0)
				default:
				}
			}
			if again == 0 {
				return
			}
		}
	}
	settle()
	for v.Now()-start < int64(span) {
		if _, ok := v.AdvanceNext(); !ok {
			t.Fatalf("no timer pending at +%v with callers parked", time.Duration(v.Now()-start))
		}
		settle()
	}
	return grants, time.Duration(v.Now() - start)
}

// TestLimiterTimersLate: a bucket or a window kept busy by 16 waiting
// callers grants what its rate allows over the time that passed, whether
// its timers fire on time or late, keyed or not. A bucket of 2,000 a
// second grants burst + rate × elapsed, less the fraction of a token still
// accruing, even when a timer is later than the burst lasts: callers are
// granted as of the instant their turn came, so the tokens that accrued
// meanwhile are not lost to the burst's cap. A window of 200 per 100ms grants its allow once per window:
// at most allow × (1 + elapsed/window), exactly that on time, and late at
// least that with each window stretched by the most lateness, since a
// caller told late asks again late and its slot reopens that much later.
// A bucket that stamps each Tick with the instant it was due, not when it
// fired, grants far too few here: about a third to four fifths.
func TestLimiterTimersLate(t *testing.T) {
	const (
		rate   = 2000
		burst  = 10 // 5ms of tokens: less than accrue while a timer is 8ms late
		allow  = 200
		window = 100 * time.Millisecond
		span   = time.Second
	)
	kinds := []struct {
		name   string
		key    string
		bucket bool
		spawn  func(e *engine.Engine) (*engine.Ref, error)
	}{
		{"bucket", "", true, func(e *engine.Engine) (*engine.Ref, error) { return SpawnBucket(e, "", rate, burst) }},
		{"keyed bucket", "k", true, func(e *engine.Engine) (*engine.Ref, error) { return SpawnKeyedBucket(e, "", rate, burst) }},
		{"window", "", false, func(e *engine.Engine) (*engine.Ref, error) { return SpawnWindow(e, "", allow, window) }},
		{"keyed window", "k", false, func(e *engine.Engine) (*engine.Ref, error) { return SpawnKeyedWindow(e, "", allow, window) }},
	}
	for _, k := range kinds {
		for _, late := range lateClocks {
			t.Run(fmt.Sprintf("%s %s", k.name, late.name), func(t *testing.T) {
				h := newHarness(t, late.opts...)
				v := h.clock
				ref, err := k.spawn(h.e)
				if err != nil {
					t.Fatal(err)
				}
				grants, elapsed := waitLoop(t, v, ref, k.key, span)
				var lo, hi float64
				if k.bucket {
					hi = burst + rate*elapsed.Seconds() + 1e-6 // a rounding's worth
					lo = math.Floor(hi) - 1
				} else {
					hi = allow * (1 + math.Floor(float64(elapsed)/float64(window)))
					lo = allow * (1 + math.Floor(float64(elapsed)/float64(window+late.most)))
				}
				if g := float64(grants); g < lo || g > hi {
					t.Fatalf("%d grants in %v, want %v to %v", grants, elapsed, lo, hi)
				}
			})
		}
	}
}

// TestNoZeroWaitRefusal: an Allow stamped after the parked callers' turn
// has come, before their late Tick, is not refused with a wait of 0 (a
// Retry-After of 0 for a caller who could have had it): the parked callers
// are granted first, in order, and then it is answered on what is left.
// With time left for only the parked callers, it is refused with a wait
// that is really ahead.
func TestNoZeroWaitRefusal(t *testing.T) {
	s := time.Second
	kinds := []struct {
		name  string
		key   string
		spawn func(e *engine.Engine) (*engine.Ref, error)
		fill  []time.Duration // Allows that empty it, at these offsets
		parks time.Duration   // two callers park here
		turns time.Duration   // when both parked callers' turns have come, and one more's
		after time.Duration   // a refusal's wait at turns, once the newcomer took the last
	}{
		{"bucket", "", func(e *engine.Engine) (*engine.Ref, error) { return SpawnBucket(e, "", 1, 3) },
			[]time.Duration{0, 0, 0}, 0, 3 * s, s},
		{"keyed bucket", "k", func(e *engine.Engine) (*engine.Ref, error) { return SpawnKeyedBucket(e, "", 1, 3) },
			[]time.Duration{0, 0, 0}, 0, 3 * s, s},
		{"window", "", func(e *engine.Engine) (*engine.Ref, error) { return SpawnWindow(e, "", 3, 10*s) },
			[]time.Duration{0, s, 2 * s}, 2 * s, 12 * s, 8 * s},
		{"keyed window", "k", func(e *engine.Engine) (*engine.Ref, error) { return SpawnKeyedWindow(e, "", 3, 10*s) },
			[]time.Duration{0, s, 2 * s}, 2 * s, 12 * s, 8 * s},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			r := newHarness(t)
			ref, err := k.spawn(r.e)
			if err != nil {
				t.Fatal(err)
			}
			for i, at := range k.fill {
				if p := ask(ref, k.key, r.at(at), 1); !p.OK {
					t.Fatalf("step %d: filling: %+v", i, p)
				}
			}
			a := park(ref, k.key, r.at(k.parks), 1, 0)
			b := park(ref, k.key, r.at(k.parks), 1, 0)
			// The clock stays put: the Tick that would grant a and b is
			// late. A newcomer stamped after their turns is answered on
			// what is left once they have been served.
			p := ask(ref, k.key, r.at(k.turns), 1)
			if !p.OK {
				t.Fatalf("step 1: a newcomer after the parked callers' turns = %+v, want granted after them", p)
			}
			for i, w := range []*Allow{a, b} {
				if p := answer(w); !p.OK {
					t.Fatalf("step 2: parked caller %d = %+v, want granted before the newcomer", i, p)
				}
			}
			p = ask(ref, k.key, r.at(k.turns), 1)
			if p.OK || p.After != k.after || p.Left != 0 {
				t.Fatalf("step 3: with nothing left = %+v, want refused, After %v, Left 0", p, k.after)
			}
		})
	}
}
