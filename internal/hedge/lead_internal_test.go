package hedge

import (
	"testing"
	"time"
)

// rang moves the lead up by an eighth of a late ring's error and down by
// all of an early ring's, the error counted as at most half the delay
// either way, and keeps the lead between zero and half the delay.
func TestLeadRang(t *testing.T) {
	const d = 5 * time.Millisecond
	for _, tc := range []struct {
		name       string
		lead, late time.Duration
		d          time.Duration
		want       time.Duration
	}{
		{"late", 0, 800 * time.Microsecond, d, 100 * time.Microsecond},
		{"early", 400 * time.Microsecond, -300 * time.Microsecond, d, 100 * time.Microsecond},
		{"early by more than the lead", 400 * time.Microsecond, -800 * time.Microsecond, d, 0},
		{"a stall counts as half the delay", 500 * time.Microsecond, 50 * time.Millisecond, d, 812500 * time.Nanosecond},
		{"held at half the delay", 2400 * time.Microsecond, 2 * time.Millisecond, d, d / 2},
		{"very early counts as half the delay, never below zero", 100 * time.Microsecond, -3 * time.Millisecond, d, 0},
		{"no delay: nothing learnt", 300 * time.Microsecond, time.Millisecond, 0, 300 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l Lead
			l.ns.Store(int64(tc.lead))
			l.rang(tc.late, tc.d)
			if got := l.Ahead(); got != tc.want {
				t.Fatalf("lead %v, rang %v late for a delay of %v: lead %v, want %v", tc.lead, tc.late, tc.d, got, tc.want)
			}
		})
	}
	var l *Lead
	l.rang(time.Millisecond, d) // a nil Lead learns nothing, and does not panic
	if l.Ahead() != 0 || l.early(d) != 0 {
		t.Fatal("a nil Lead is ahead")
	}
}
