package policy

import (
	"testing"
	"time"
)

func TestGiveLent(t *testing.T) {
	p := NewPool[int](Limits{Size: 2, Idle: 2}, Ward{})
	p.Take(0)
	p.Made(1, 0) // 1 lent
	p.Take(0)    // room reserved for a second
	steps := []struct {
		item       int
		kept, lent bool
		idle, busy int
	}{
		{item: 1, kept: true, lent: true, idle: 1, busy: 1}, // lent: taken back
		{item: 1, idle: 1, busy: 1},                         // idle already: nothing changes
		{item: 7, idle: 1, busy: 1},                         // never lent: the reserved room stays reserved
	}
	for i, s := range steps {
		kept, lent := p.GiveLent(s.item, int64(i))
		if kept != s.kept || lent != s.lent || p.Idle() != s.idle || p.Busy() != s.busy {
			t.Errorf("step %d: GiveLent(%d) = %v, %v; idle %d busy %d; want %v, %v; idle %d busy %d",
				i, s.item, kept, lent, p.Idle(), p.Busy(), s.kept, s.lent, s.idle, s.busy)
		}
	}
}

func TestStamps(t *testing.T) {
	tests := []struct {
		limits     Limits
		ward       Ward
		take, give bool
	}{
		{Limits{Size: 10}, Ward{}, false, false},
		{Limits{Size: 10, Keep: time.Minute}, Ward{}, false, true},
		{Limits{Size: 10, Life: -time.Minute}, Ward{}, false, false}, // negative is no limit
		{Limits{Size: 10}, Ward{Bucket: Rate{PerSecond: 1}}, true, true},
		{Limits{Size: 10}, Ward{Backoff: Backoff{Base: time.Second}}, true, true},
	}
	for i, tc := range tests {
		if take, give := Stamps(tc.limits, tc.ward); take != tc.take || give != tc.give {
			t.Errorf("step %d: Stamps = %v, %v; want %v, %v", i, take, give, tc.take, tc.give)
		}
	}
}
