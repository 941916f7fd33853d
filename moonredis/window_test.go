package moonredis

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
)

// TestWindowSteps walks one key of an exact window of 3 a second through
// fixed instants: each event leaves the window exactly a second after it
// was counted, and a refusal waits for the oldest to leave.
func TestWindowSteps(t *testing.T) {
	f := newFake(t)
	cfg := f.cfg()
	cfg.Timeout = 100 * time.Millisecond // so the key is kept a window, not twice the Timeout
	w, err := NewWindow(f.eng, cfg, 3, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	steps := []struct {
		at   time.Duration
		want client.Decision
	}{
		{0, client.Decision{OK: true, Left: 2}},
		{100 * ms, client.Decision{OK: true, Left: 1}},
		{200 * ms, client.Decision{OK: true, Left: 0}},
		{300 * ms, client.Decision{Wait: 700 * ms}},
		{999 * ms, client.Decision{Wait: 1 * ms}},
		{1000 * ms, client.Decision{OK: true, Left: 0}}, // the first left; this one took its place
		{1050 * ms, client.Decision{Wait: 50 * ms}},
		{1100 * ms, client.Decision{OK: true, Left: 0}},
		{3000 * ms, client.Decision{OK: true, Left: 2}},
	}
	start := f.clock.Now()
	for i, s := range steps {
		f.advance(time.Duration(start + int64(s.at) - f.clock.Now()))
		if got := w.Try("k"); got != s.want {
			t.Fatalf("step %d: Try at %v = %+v, want %+v", i, s.at, got, s.want)
		}
	}
	if got := w.Left("k"); got != 2 {
		t.Errorf("Left = %d, want 2", got)
	}
	if got := w.Left("other"); got != 3 {
		t.Errorf("Left of a key not seen = %d, want 3", got)
	}
	// The key expires a window after its last event: idle keys vanish.
	f.advance(time.Second + 2*ms)
	if f.mr.Exists("moonredis:window:k") {
		t.Error("an idle key is still in Redis a window after its last event")
	}
}

// TestWindowWaitFIFO: waiters take the instants the oldest events leave,
// in the order they asked, and an Allow meanwhile is refused behind them.
func TestWindowWaitFIFO(t *testing.T) {
	f := newFake(t)
	w, err := NewWindow(f.eng, f.cfg(), 2, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	w.Allow("k")
	f.advance(500 * time.Millisecond)
	w.Allow("k")
	order := make(chan int, 2)
	for i := range 2 {
		go func() {
			if err := w.Wait(context.Background(), "k"); err != nil {
				t.Error(err)
			}
			order <- i
		}()
		asleep(t, f, &w.l, i+1)
	}
	if d := w.Try("k"); d.OK || d.Wait != 1500*time.Millisecond {
		t.Fatalf("Try behind two waiters = %+v, want a refusal of 1.5s", d)
	}
	f.advance(500 * time.Millisecond) // the first event leaves
	if got := recv(t, order, "the first waiter"); got != 0 {
		t.Fatalf("waiter %d woke first", got)
	}
	f.advance(500 * time.Millisecond) // the second leaves
	if got := recv(t, order, "the second waiter"); got != 1 {
		t.Fatalf("waiter %d woke second", got)
	}
}

// TestApproxWindow: the counter lets allow through in a fixed window, and
// in the next one as much as the previous window's weight has faded.
func TestApproxWindow(t *testing.T) {
	f := newFake(t)
	// Start on a window's edge, so the weights are round.
	edge := (f.clock.Now()/int64(time.Second) + 1) * int64(time.Second)
	f.advance(time.Duration(edge - f.clock.Now()))
	w, err := NewApproxWindow(f.eng, f.cfg(), 10, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n := 0
		for n <= 100 && w.Allow("k") { // bounded: a limiter that always allows fails, not hangs
			n++
		}
		return n
	}
	if got := count(); got != 10 {
		t.Fatalf("first window let %d through, want 10", got)
	}
	// Room for one comes a tenth into the next window, when the ten
	// weigh nine.
	if d := w.Try("k"); d.Wait != 1100*time.Millisecond {
		t.Errorf("refusal at the window's start waits %v, want 1.1s", d.Wait)
	}
	f.advance(1500 * time.Millisecond) // half of the previous window's 10 still weigh
	if got := count(); got != 5 {
		t.Fatalf("half-way through the next window let %d through, want 5", got)
	}
}

// TestWindowBadInput: quotas that cannot be are errors.
func TestWindowBadInput(t *testing.T) {
	f := newFake(t)
	for _, c := range []struct {
		allow  int
		window time.Duration
	}{{0, time.Second}, {-1, time.Second}, {1, 0}, {1, time.Microsecond}} {
		if _, err := NewWindow(f.eng, f.cfg(), c.allow, c.window); err == nil {
			t.Errorf("NewWindow(%d, %v): no error", c.allow, c.window)
		}
	}
}

// TestWindowFailLocal: with Redis gone, a window under FailLocal counts
// each process's share of the quota in the process.
func TestWindowFailLocal(t *testing.T) {
	f := newFake(t)
	cfg := f.cfg()
	cfg.FailMode, cfg.ExpectedProcesses, cfg.Timeout = FailLocal, 3, 50*time.Millisecond
	w, err := NewWindow(f.eng, cfg, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	f.mr.Close()
	allowed := 0
	for range 10 {
		if w.Allow("k") {
			allowed++
		}
	}
	if allowed != 3 { // 10 shared by 3, rounded down: never more than the whole
		t.Errorf("allowed %d of 10 with Redis gone, want the share 3", allowed)
	}
	if got := w.Delay("k"); got <= 0 {
		t.Errorf("Delay with the local share spent = %v, want a wait", got)
	}
}

// TestApproxWindowWait: waiters on the counter take their places in the
// order they asked and wake when the estimate has room for them; one whose
// room would come only in the next fixed window is refused at once, saying
// when, since it could not be counted where its event falls.
func TestApproxWindowWait(t *testing.T) {
	f := newFake(t)
	edge := (f.clock.Now()/int64(time.Second) + 1) * int64(time.Second)
	f.advance(time.Duration(edge - f.clock.Now()))
	w, err := NewApproxWindow(f.eng, f.cfg(), 4, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		w.Allow("k")
	}
	f.advance(time.Second) // the four weigh 4 at the next window's start
	order := make(chan int, 3)
	for i := range 3 {
		go func() {
			if err := w.Wait(context.Background(), "k"); err != nil {
				t.Error(err)
			}
			order <- i
		}()
		asleep(t, f, &w.l, i+1)
	}
	var we *client.WaitError
	if err := w.Wait(context.Background(), "k"); !errors.As(err, &we) || we.Wait != time.Second {
		t.Fatalf("a fourth Wait, whose room comes with the next window = %v, want a *WaitError of 1s", err)
	}
	for i := range 3 {
		d, ok := f.clock.Next()
		if !ok {
			t.Fatalf("waiter %d sleeps on no timer", i)
		}
		if d != 250*time.Millisecond {
			t.Errorf("waiter %d sleeps %v more, want 250ms: a quarter of the weight fades for each", i, d)
		}
		f.advance(d)
		if got := recv(t, order, "a waiter at its slot"); got != i {
			t.Fatalf("waiter %d woke in place %d", got, i)
		}
	}
}

// TestApproxWindowBound: Allows and Waits on the approximate window, many
// more than it lets through, never put more than twice allow events in
// any stretch of one window, the bound NewApproxWindow states. Waiters
// counted in the current fixed window with slots in later ones would break
// it many times over.
func TestApproxWindowBound(t *testing.T) {
	f := newFake(t)
	edge := (f.clock.Now()/int64(time.Second) + 1) * int64(time.Second)
	f.advance(time.Duration(edge - f.clock.Now()))
	const allow = 10
	w, err := NewApproxWindow(f.eng, f.cfg(), allow, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var events []int64 // when each counted event happens, on the engine's clock
	for range 30 {     // three seconds, a step every 100 ms
		if w.Allow("k") {
			events = append(events, f.clock.Now())
		}
		for range 4 {
			// A Wait's verdict: its event happens at its slot.
			v, _ := w.l.await(context.Background(), "k", 1, 0)
			if v.ok {
				events = append(events, v.landed+int64(v.wait))
			}
		}
		f.advance(100 * time.Millisecond)
	}
	slices.Sort(events)
	for i, at := range events {
		n, _ := slices.BinarySearch(events, at+int64(time.Second))
		if n-i > 2*allow {
			t.Fatalf("%d events in the second from %v, want at most %d", n-i, time.Duration(at-edge), 2*allow)
		}
	}
	if len(events) < 2*allow { // not refusing everything, which would pass the above
		t.Errorf("%d events in three seconds at allow %d a second, want at least %d", len(events), allow, 2*allow)
	}
}
