package hedge_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/internal/hedge"
	"github.com/moonpool-go/moonpool/internal/vclock"
)

// A Lead learns how late the clock's timers ring and sets the alarms for
// hedges early by about as much, so hedges go out close to Delay after
// their attempts. It learns from the low end of the lateness, so few
// hedges go out before their Delay. Without one, every hedge is as late
// as the timer.
func TestLeadSendsHedgesOnTime(t *testing.T) {
	const delay = 5 * time.Millisecond
	for _, tc := range []struct {
		name   string
		late   vclock.Option
		lead   bool
		lo, hi time.Duration // the mean hedge's offset from delay, over the last half of the races
		early  int           // the most of those races whose hedge went out before delay
	}{
		{"on time, with a lead", vclock.WithLateness(0), true, 0, 0, 0},
		{"700µs late, without a lead", vclock.WithLateness(700 * time.Microsecond), false, 700 * time.Microsecond, 700 * time.Microsecond, 0},
		{"700µs late, with a lead", vclock.WithLateness(700 * time.Microsecond), true, 0, 20 * time.Microsecond, 0},
		{"up to 1ms late, without a lead", vclock.WithRandomLateness(time.Millisecond, 7), false, 350 * time.Microsecond, 650 * time.Microsecond, 0},
		// The lead settles near a quarter of the spread: hedges go out
		// about a quarter of a millisecond late on average, and one in
		// five early, by less than the lead.
		{"up to 1ms late, with a lead", vclock.WithRandomLateness(time.Millisecond, 7), true, 100 * time.Microsecond, 350 * time.Microsecond, races / 2 / 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock := vclock.NewVirtual(tc.late)
				var lead *hedge.Lead
				if tc.lead {
					lead = new(hedge.Lead)
				}
				var sum time.Duration
				early := 0
				for i := range races {
					off := hedgeOffset(t, clock, lead, delay)
					if i >= races/2 {
						sum += off
						if off < 0 {
							early++
						}
					}
				}
				if mean := sum / (races / 2); mean < tc.lo || mean > tc.hi {
					t.Fatalf("hedges went out %v after the delay on average, want %v to %v (lead %v)", mean, tc.lo, tc.hi, lead.Ahead())
				}
				if early > tc.early {
					t.Fatalf("%d of %d hedges went out early, want at most %d", early, races/2, tc.early)
				}
			})
		})
	}
}

// races is how many races TestLeadSendsHedgesOnTime runs each way.
const races = 200

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
			t.Fatalf("the last hedge went out %v after the delay, want %v (lead %v)", off, want, lead.Ahead())
		}
		if lead.Ahead() != delay/2 {
			t.Fatalf("lead %v, want it held at half the delay, %v", lead.Ahead(), delay/2)
		}
	})
}

// A Lead takes in an eighth of each ring's error, once a ring: with
// timers 700µs late, the lead after each race is a fixed sum.
func TestLeadLearnsAnEighthARing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := vclock.NewVirtual(vclock.WithLateness(700 * time.Microsecond))
		lead := new(hedge.Lead)
		// 700µs/8; then an eighth of the 612.5µs still late; and so on.
		for i, want := range []time.Duration{87500, 164062, 231054} {
			hedgeOffsets(t, clock, lead, 5*time.Millisecond, 1)
			if got := lead.Ahead(); got != want {
				t.Fatalf("lead after ring %d = %v, want %v", i+1, got, want)
			}
		}
	})
}

// A race that sends several hedges sets each alarm Delay after the hedge
// before it went out, early by the lead.
func TestLeadEveryHedgeOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 5 * time.Millisecond
		clock := vclock.NewVirtual(vclock.WithLateness(700 * time.Microsecond))
		lead := new(hedge.Lead)
		var offs []time.Duration
		for range 30 {
			offs = hedgeOffsets(t, clock, lead, delay, 3)
		}
		for i, off := range offs {
			if off < -20*time.Microsecond || off > 20*time.Microsecond {
				t.Fatalf("hedge %d went out %v after its delay, want within 20µs (all: %v)", i+1, off, offs)
			}
		}
	})
}

// hedgeOffset runs one race on clock whose attempt never answers and
// whose hedge answers at once, and says how long after delay the hedge
// went out.
func hedgeOffset(t *testing.T, clock *vclock.Virtual, lead *hedge.Lead, delay time.Duration) time.Duration {
	t.Helper()
	return hedgeOffsets(t, clock, lead, delay, 1)[0]
}

// hedgeOffsets runs one race on clock that sends left hedges: the
// attempt and every hedge but the last never answer, and the last
// answers at once. It says how long after its due time each hedge went
// out: delay after the attempt, or after the hedge before it.
func hedgeOffsets(t *testing.T, clock *vclock.Virtual, lead *hedge.Lead, delay time.Duration, left int) []time.Duration {
	t.Helper()
	sent := make(chan int64, left)
	n := 0
	r := &hedge.Race[string]{
		Clock: clock,
		Delay: delay,
		Left:  left,
		Lead:  lead,
		Ready: func(ctx context.Context) (hedge.Send[string], func(), bool) {
			n++
			last := n == left
			return func() hedge.Result[string] {
				sent <- clock.Now()
				if !last {
					<-ctx.Done()
					return hedge.Result[string]{Err: ctx.Err()}
				}
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
	offs := make([]time.Duration, 0, left)
	prev := start
	for range left {
		synctest.Wait()
		if _, ok := clock.AdvanceNext(); !ok {
			t.Fatal("the race set no alarm")
		}
		synctest.Wait()
		at := <-sent
		offs = append(offs, time.Duration(at-prev)-delay)
		prev = at
	}
	if err := <-done; err != nil || r.Sent != left {
		t.Fatalf("Run = %v with %d sent, want the last hedge's answer after %d", err, r.Sent, left)
	}
	synctest.Wait()
	return offs
}

// A Lead serves a fixed delay only: a hedge past a latency quantile is
// set for the quantile, not early.
func TestLeadFor(t *testing.T) {
	l := new(hedge.Lead)
	for _, tc := range []struct {
		name string
		h    *client.Hedge
		want *hedge.Lead
	}{
		{"no hedging", nil, nil},
		{"fixed delay", &client.Hedge{Delay: 5 * time.Millisecond}, l},
		{"fixed delay, a quantile too", &client.Hedge{Delay: 5 * time.Millisecond, Quantile: 0.9}, l},
		{"quantile", &client.Hedge{Quantile: 0.97}, nil},
		{"default quantile", &client.Hedge{}, nil},
		{"delay below zero, so a quantile", &client.Hedge{Delay: -time.Millisecond, Quantile: 0.9}, nil},
	} {
		if got := l.For(tc.h); got != tc.want {
			t.Errorf("%s: For = %p, want %p", tc.name, got, tc.want)
		}
		// Delay gives the delay and the lead together; with no budget,
		// only a fixed delay is due.
		d, lead, ok := l.Delay(tc.h, nil)
		fixed := tc.h != nil && tc.h.Delay > 0
		if lead != tc.want || ok != fixed || (fixed && d != tc.h.Delay) {
			t.Errorf("%s: Delay = %v, %p, %v; want the delay, %p, %v", tc.name, d, lead, ok, tc.want, fixed)
		}
	}
}
