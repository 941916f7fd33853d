package hedge_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moonpool-go/moonpool/internal/hedge"
	"github.com/moonpool-go/moonpool/internal/vclock"
)

// A Lead learns how late the clock's timers ring and sets the alarms for
// hedges early by as much, so hedges go out Delay after their attempts on
// average. Without one, every hedge is as late as the timer.
func TestLeadSendsHedgesOnTime(t *testing.T) {
	const delay = 5 * time.Millisecond
	for _, tc := range []struct {
		name   string
		late   vclock.Option
		lead   bool
		lo, hi time.Duration // the mean hedge's offset from delay, over the last half of the races
	}{
		{"on time, with a lead", vclock.WithLateness(0), true, 0, 0},
		{"700µs late, without a lead", vclock.WithLateness(700 * time.Microsecond), false, 700 * time.Microsecond, 700 * time.Microsecond},
		{"700µs late, with a lead", vclock.WithLateness(700 * time.Microsecond), true, 0, 20 * time.Microsecond},
		{"up to 1ms late, without a lead", vclock.WithRandomLateness(time.Millisecond, 7), false, 350 * time.Microsecond, 650 * time.Microsecond},
		{"up to 1ms late, with a lead", vclock.WithRandomLateness(time.Millisecond, 7), true, -150 * time.Microsecond, 150 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock := vclock.NewVirtual(tc.late)
				var lead *hedge.Lead
				if tc.lead {
					lead = new(hedge.Lead)
				}
				const races = 60
				var sum time.Duration
				for i := range races {
					off := hedgeOffset(t, clock, lead, delay)
					if i >= races/2 {
						sum += off
					}
				}
				if mean := sum / (races / 2); mean < tc.lo || mean > tc.hi {
					t.Fatalf("hedges went out %v after the delay on average, want %v to %v (lead %v)", mean, tc.lo, tc.hi, lead.Now())
				}
			})
		})
	}
}

// A Lead never sets an alarm for less than half the delay, however late
// the timers ring.
func TestLeadAtMostHalfTheDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 4 * time.Millisecond
		clock := vclock.NewVirtual(vclock.WithLateness(10 * time.Millisecond))
		lead := new(hedge.Lead)
		var off time.Duration
		for range 40 {
			off = hedgeOffset(t, clock, lead, delay)
		}
		// Set for delay/2, the alarm rings 10ms later.
		if want := 10*time.Millisecond - delay/2; off != want {
			t.Fatalf("the last hedge went out %v after the delay, want %v (lead %v)", off, want, lead.Now())
		}
		if lead.Now() != delay {
			t.Fatalf("lead %v, want it held at the delay, %v", lead.Now(), delay)
		}
	})
}

// hedgeOffset runs one race on clock whose attempt never answers and
// whose hedge answers at once, and says how long after delay the hedge
// went out.
func hedgeOffset(t *testing.T, clock *vclock.Virtual, lead *hedge.Lead, delay time.Duration) time.Duration {
	t.Helper()
	sent := make(chan int64, 1)
	r := &hedge.Race[string]{
		Clock: clock,
		Delay: delay,
		Left:  1,
		Lead:  lead,
		Ready: func(context.Context) (hedge.Send[string], func(), bool) {
			return func() hedge.Result[string] {
				sent <- clock.Now()
				return hedge.Result[string]{Val: "hedge", Answer: true}
			}, nil, true
		},
	}
	actx, cancel := context.WithCancel(context.Background())
	start := clock.Now()
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(context.Background(), cancel, func() hedge.Result[string] {
			<-actx.Done()
			return hedge.Result[string]{Err: actx.Err()}
		})
		done <- err
	}()
	synctest.Wait()
	if _, ok := clock.AdvanceNext(); !ok {
		t.Fatal("the race set no alarm")
	}
	if err := <-done; err != nil || r.Sent != 1 {
		t.Fatalf("Run = %v with %d sent, want the hedge's answer", err, r.Sent)
	}
	synctest.Wait()
	return time.Duration(<-sent-start) - delay
}
