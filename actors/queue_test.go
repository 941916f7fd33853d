package actors

import (
	"slices"
	"testing"
)

// waiting is a request for the queue's tests.
type waiting struct {
	id  int
	gen uint64
}

func (w *waiting) handle() *uint64 { return &w.gen }

func newTestQueue(lines int) *queue[*waiting] {
	q := &queue[*waiting]{}
	q.init()
	for range lines {
		q.newLine(-1)
	}
	return q
}

// popAll takes line li's callers out in order and returns their ids.
func popAll(q *queue[*waiting], li int32) []int {
	var ids []int
	for {
		w, ok := q.front(li)
		if !ok {
			return ids
		}
		q.pop(li)
		ids = append(ids, w.id)
	}
}

func parkAll(q *queue[*waiting], li int32, ids ...int) []*waiting {
	ws := make([]*waiting, len(ids))
	for i, id := range ids {
		ws[i] = &waiting{id: id}
		q.park(li, ws[i], float64(id))
	}
	return ws
}

// TestQueueFIFO: each line hands its callers back in the order they
// parked, whatever the other lines do, and counts their cost.
func TestQueueFIFO(t *testing.T) {
	q := newTestQueue(2)
	parkAll(q, 0, 1, 2)
	parkAll(q, 1, 10)
	parkAll(q, 0, 3)
	parkAll(q, 1, 20)
	if q.parked != 5 || q.lines[0].n != 3 || q.lines[0].ahead != 6 || q.lines[1].ahead != 30 {
		t.Fatalf("parked %d, line 0 holds %d costing %v, line 1 costs %v", q.parked, q.lines[0].n, q.lines[0].ahead, q.lines[1].ahead)
	}
	if got := popAll(q, 0); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("line 0 gave %v, want [1 2 3]", got)
	}
	if got := popAll(q, 1); !slices.Equal(got, []int{10, 20}) {
		t.Errorf("line 1 gave %v, want [10 20]", got)
	}
	if q.parked != 0 || q.lines[0].ahead != 0 {
		t.Errorf("empty queue: parked %d, ahead %v", q.parked, q.lines[0].ahead)
	}
}

// TestQueueWithdraw: a caller withdrawn by its handle leaves its line at
// once, from the front, the middle or the back, and the others keep their
// order; withdrawing it again, or one never parked, finds nothing.
func TestQueueWithdraw(t *testing.T) {
	for _, tc := range []struct {
		name     string
		withdraw []int // positions in 1..5
		want     []int
	}{
		{"front", []int{0}, []int{2, 3, 4, 5}},
		{"middle", []int{2}, []int{1, 2, 4, 5}},
		{"back", []int{4}, []int{1, 2, 3, 4}},
		{"all but one", []int{0, 1, 3, 4}, []int{3}},
		{"all", []int{4, 0, 2, 1, 3}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newTestQueue(1)
			ws := parkAll(q, 0, 1, 2, 3, 4, 5)
			for _, i := range tc.withdraw {
				if li, ok := q.withdraw(ws[i]); !ok || li != 0 {
					t.Fatalf("withdraw %d: line %d, found %v", ws[i].id, li, ok)
				}
				if _, ok := q.withdraw(ws[i]); ok {
					t.Fatalf("withdraw %d twice found it twice", ws[i].id)
				}
			}
			if _, ok := q.withdraw(&waiting{id: 9}); ok {
				t.Fatal("found a request never parked")
			}
			if _, ok := q.withdraw(nil); ok {
				t.Fatal("found nil")
			}
			if got := popAll(q, 0); !slices.Equal(got, tc.want) {
				t.Errorf("left %v, want %v", got, tc.want)
			}
		})
	}
}

// TestQueueStaleHandle: a request answered (popped) and parked again, or
// whose slot went to another request, is not withdrawn by a handle from an
// earlier parking, nor does that handle withdraw the slot's new holder.
func TestQueueStaleHandle(t *testing.T) {
	q := newTestQueue(1)
	a := parkAll(q, 0, 1)[0]
	old := a.gen
	q.pop(0) // a is answered; its slot is free
	b := parkAll(q, 0, 2)[0]
	if uint32(b.gen) != uint32(old) {
		t.Fatalf("b took slot %d, want a's %d (the case under test)", uint32(b.gen), uint32(old))
	}
	if _, ok := q.withdraw(a); ok {
		t.Fatal("a, answered, was withdrawn from b's slot")
	}
	// a comes back with the handle of its first parking, as a Withdraw
	// sent before its answer arrived would read it.
	a.gen = old
	if _, ok := q.withdraw(a); ok {
		t.Fatal("a stale handle withdrew something")
	}
	q.park(0, a, 1) // reused: parked again
	if a.gen == old {
		t.Fatal("a parked again under its old handle")
	}
	if got := popAll(q, 0); !slices.Equal(got, []int{2, 1}) {
		t.Errorf("left %v, want [2 1]", got)
	}
}

// TestQueueCompaction: once a spike has passed, the slots go back, the
// callers still parked keep their order and their (rewritten) handles, and
// a handle from before the compaction stays stale.
func TestQueueCompaction(t *testing.T) {
	q := newTestQueue(2)
	const spike = 1000
	var ws []*waiting
	for i := range spike {
		ws = append(ws, parkAll(q, int32(i%2), i)...)
	}
	gone := ws[0]
	q.pop(0)
	before := gone.gen
	kept := map[int]bool{2: true, 501: true, 998: true, 999: true}
	for _, w := range ws[1:] {
		if !kept[w.id] {
			if _, ok := q.withdraw(w); !ok {
				t.Fatalf("withdraw %d: not found", w.id)
			}
		}
	}
	if len(q.slots) > compactAt {
		t.Errorf("%d parked hold %d slots", q.parked, len(q.slots))
	}
	// gone's old handle must not name a moved caller.
	gone.gen = before
	if _, ok := q.withdraw(gone); ok {
		t.Error("a handle from before the compaction withdrew something")
	}
	w501 := ws[501]
	if _, ok := q.withdraw(w501); !ok {
		t.Fatal("a caller moved by the compaction could not be withdrawn")
	}
	if got := popAll(q, 0); !slices.Equal(got, []int{2, 998}) {
		t.Errorf("line 0 left %v, want [2 998]", got)
	}
	if got := popAll(q, 1); !slices.Equal(got, []int{999}) {
		t.Errorf("line 1 left %v, want [999]", got)
	}
}

// TestQueueDrain: drain hands every caller out once, each line in order,
// and leaves the queue empty.
func TestQueueDrain(t *testing.T) {
	q := newTestQueue(2)
	parkAll(q, 0, 1, 2)
	parkAll(q, 1, 3)
	var got []int
	q.drain(func(w *waiting) { got = append(got, w.id) })
	if !slices.Equal(got, []int{1, 2, 3}) || q.parked != 0 {
		t.Errorf("drained %v leaving %d, want [1 2 3] leaving 0", got, q.parked)
	}
}
