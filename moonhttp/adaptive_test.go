package moonhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moonhttp"
)

// fixedAdaptive is an adaptive gate on r's engine whose limit cannot move
// from limit, with a line of queue.
func (r *rig) fixedAdaptive(limit, queue int) *client.AdaptiveGate {
	r.t.Helper()
	g, err := client.NewAdaptiveGate(r.eng, client.AdaptiveConfig{Min: limit, Max: limit, Start: limit, Queue: queue})
	if err != nil {
		r.t.Fatal(err)
	}
	return g
}

// inLine waits, with a deadline, until g has n requests in line.
func inLine(t *testing.T, g *client.AdaptiveGate, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for g.Stats().Queued != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d in line after 10s, want %d", g.Stats().Queued, n)
		}
		runtime.Gosched()
	}
}

// answer is one request's outcome, named by its priority.
type answer struct {
	priority string
	status   int
	retry    string
	body     string
}

// askAsync sends a GET with the priority header set to priority ("" for
// none) and returns where its answer comes.
func askAsync(t *testing.T, c *http.Client, url, priority string) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("GET", url, nil)
		if priority != "" {
			req.Header.Set(moonhttp.PriorityHeader, priority)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Errorf("%s: %v", priority, err)
			ch <- answer{priority: priority}
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ch <- answer{priority, resp.StatusCode, resp.Header.Get("Retry-After"), string(body)}
	}()
	return ch
}

// answerOf is the next answer on ch, with a deadline.
func answerOf(t *testing.T, ch <-chan answer, what string) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no answer after 10s", what)
	}
	return answer{}
}

// TestAdaptivePriorityUnderOverload: with the gate full and its line full
// of low requests, a critical request takes the place of the latest low
// one, which is refused with 503; another low one is refused at once; as
// room comes back the critical request runs first, and the handler sees
// each request's priority in its ctx.
func TestAdaptivePriorityUnderOverload(t *testing.T) {
	r := newRig(t)
	g := r.fixedAdaptive(2, 2)
	release, stop := make(chan struct{}), make(chan struct{})
	entered := make(chan string, 8)
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		entered <- client.PriorityFrom(req.Context()).String()
		if req.URL.Path == "/block" {
			select {
			case <-release:
			case <-stop:
			}
		}
		io.WriteString(w, "ok")
	})
	srv, c := serve(t, moonhttp.Adaptive(g, nil)(h))
	t.Cleanup(func() { // before the server closes: a failed test lets its requests go
		close(stop)
		g.Close(context.Background())
	})
	next := func(what string) string {
		t.Helper()
		select {
		case p := <-entered:
			return p
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no request entered after 10s", what)
		}
		return ""
	}

	blockers := make(chan answer, 2)
	for range 2 {
		go func() { blockers <- answerOf(t, askAsync(t, c, srv.URL+"/block", ""), "blocker") }()
	}
	for range 2 {
		if p := next("blocker"); p != "normal" {
			t.Fatalf("a request without the header ran as %q, want normal", p)
		}
	}
	answers := make(chan answer, 3)
	block := srv.URL + "/block"
	lows := []<-chan answer{askAsync(t, c, block, "low")}
	inLine(t, g, 1)
	lows = append(lows, askAsync(t, c, block, "low"))
	inLine(t, g, 2)
	for _, ch := range lows {
		go func() { answers <- answerOf(t, ch, "low") }()
	}
	go func() { answers <- answerOf(t, askAsync(t, c, block, "critical"), "critical") }()

	a := answerOf(t, answers, "the line full of low requests")
	if a.priority != "low" || a.status != 503 || a.retry != "1" || !strings.Contains(a.body, moonhttp.ProblemReducedCapacity) {
		t.Fatalf("first answer %+v, want a low request refused with 503, Retry-After 1, a reduced-capacity problem", a)
	}
	inLine(t, g, 2)
	if a := answerOf(t, askAsync(t, c, block, "low"), "a low request at a full line"); a.status != 503 || a.retry != "1" {
		t.Fatalf("a low request at a line full of low and critical: %+v, want 503 at once", a)
	}

	// One request finishes at a time: the critical one, though it came
	// last, runs first, and the low one waits for the next room.
	release <- struct{}{}
	if p := next("first waiter"); p != "critical" {
		t.Fatalf("%s ran first, want critical", p)
	}
	inLine(t, g, 1)
	release <- struct{}{}
	if p := next("second waiter"); p != "low" {
		t.Fatalf("%s ran second, want low", p)
	}
	for range 2 {
		release <- struct{}{}
	}
	for range 2 {
		if a := answerOf(t, blockers, "blocker"); a.status != 200 {
			t.Fatalf("blocker: %+v", a)
		}
		if a := answerOf(t, answers, "waiter"); a.status != 200 {
			t.Fatalf("waiter: %+v, want 200", a)
		}
	}
	s := g.Stats()
	if s.InFlight != 0 || s.Queued != 0 || s.Classes[0].QueueFull != 2 || s.Classes[0].Entered != 1 ||
		s.Classes[1].Entered != 2 || s.Classes[3].Entered != 1 {
		t.Fatalf("stats %+v, want 2 low refused for a full line, 1 low, 2 normal and 1 critical let in", s)
	}
}

// TestAdaptiveReadsPriority: the priority next sees in its ctx, from the
// default header, a header of another name, and a PriorityFunc that trusts
// no header. With a nil gate nothing is refused.
func TestAdaptiveReadsPriority(t *testing.T) {
	tests := []struct {
		name     string
		priority moonhttp.PriorityFunc
		header   []string // name, value
		want     string
	}{
		{"no header", nil, nil, "normal"},
		{"high", nil, []string{"Moonpool-Priority", "high"}, "high"},
		{"any case, spaces", nil, []string{"moonpool-priority", " CRITICAL "}, "critical"},
		{"unknown value", nil, []string{"Moonpool-Priority", "urgent"}, "normal"},
		{"other header", moonhttp.HeaderPriority("x-priority"), []string{"X-Priority", "low"}, "low"},
		{"other header, default sent", moonhttp.HeaderPriority("X-Priority"), []string{"Moonpool-Priority", "low"}, "normal"},
		{"untrusted", func(*http.Request) client.Priority { return client.PriorityLow }, []string{"Moonpool-Priority", "critical"}, "low"},
	}
	for _, tc := range tests {
		var got string
		h := moonhttp.Adaptive(nil, tc.priority)(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			got = client.PriorityFrom(req.Context()).String()
		}))
		w := newRecorder()
		if tc.header != nil {
			w.req.Header.Set(tc.header[0], tc.header[1])
		}
		h.ServeHTTP(w, w.req)
		if got != tc.want || w.Code != 200 {
			t.Errorf("%s: next saw %q (status %d), want %q", tc.name, got, w.Code, tc.want)
		}
	}
}

// learn lets n calls through g, each taking rtt on the rig's clock, and
// moves the clock on until the gate has a latency.
func (r *rig) learn(g *client.AdaptiveGate, n int, rtt time.Duration) {
	r.t.Helper()
	for range n {
		p, err := g.Enter(context.Background())
		if err != nil {
			r.t.Fatal(err)
		}
		r.clock.Advance(rtt)
		p.Leave()
	}
	for range 40 {
		if g.Stats().Latency != 0 {
			return
		}
		r.clock.Advance(25 * time.Millisecond)
	}
	r.t.Fatalf("no latency learnt from %d calls of %v", n, rtt)
}

// TestAdaptiveDeadline: a request whose deadline comes before its
// expected wait is refused at once with 503 and that wait as Retry-After,
// and next never runs.
func TestAdaptiveDeadline(t *testing.T) {
	r := newRig(t)
	g := r.fixedAdaptive(1, 4)
	r.learn(g, 20, 10*time.Second)
	in, err := g.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer in.Leave()
	ran := false
	h := moonhttp.Adaptive(g, nil)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
	// A timeout around the gate, as http.TimeoutHandler sets one. The
	// wait ahead is one latency, 10 s on the engine's clock.
	timed := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), 5*time.Second)
		defer cancel()
		h.ServeHTTP(w, req.WithContext(ctx))
	})
	w := newRecorder()
	timed.ServeHTTP(w, w.req)
	if w.Code != 503 || w.Header().Get("Retry-After") != "10" || ran {
		t.Fatalf("%d, Retry-After %q, next ran %v; want 503, 10, not run", w.Code, w.Header().Get("Retry-After"), ran)
	}
	if s := g.Stats(); s.Classes[1].Deadline != 1 || s.Queued != 0 {
		t.Fatalf("stats %+v, want one refused for its deadline, none in line", s)
	}
}

// ending is a ctx that ends with err when end is called, and has no
// deadline, so the gate queues it.
type ending struct {
	context.Context
	done chan struct{}
	once sync.Once
	err  error
}

func newEnding(err error) *ending {
	return &ending{Context: context.Background(), done: make(chan struct{}), err: err}
}

func (c *ending) end()                  { c.once.Do(func() { close(c.done) }) }
func (c *ending) Done() <-chan struct{} { return c.done }
func (c *ending) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// TestAdaptiveEndsInLine: a request cancelled while in line leaves it and
// is written nothing; one whose deadline passes in line gets 503 and
// Retry-After: 1. Neither reaches next.
func TestAdaptiveEndsInLine(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		wrote bool
	}{
		{"cancelled", context.Canceled, false},
		{"deadline", context.DeadlineExceeded, true},
	}
	for _, tc := range tests {
		r := newRig(t)
		g := r.fixedAdaptive(1, 4)
		in, err := g.Enter(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ran := false
		h := moonhttp.Adaptive(g, nil)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
		ctx := newEnding(tc.err)
		w := newRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(w, w.req.WithContext(ctx))
		}()
		inLine(t, g, 1)
		ctx.end()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still in line 10s after its ctx ended", tc.name)
		}
		switch {
		case ran:
			t.Errorf("%s: next ran", tc.name)
		case w.wrote != tc.wrote:
			t.Errorf("%s: wrote %v, want %v", tc.name, w.wrote, tc.wrote)
		case tc.wrote && (w.Code != 503 || w.Header().Get("Retry-After") != "1"):
			t.Errorf("%s: %d, Retry-After %q; want 503, 1", tc.name, w.Code, w.Header().Get("Retry-After"))
		}
		if s := g.Stats(); s.Queued != 0 || s.Classes[1].Cancelled != 1 {
			t.Errorf("%s: stats %+v, want the request withdrawn", tc.name, s)
		}
		in.Leave()
	}
}

// TestAdaptivePanicGivesRoomBack: a handler that panics gives its room
// back, and a closed gate refuses with 503.
func TestAdaptivePanicGivesRoomBack(t *testing.T) {
	r := newRig(t)
	g := r.fixedAdaptive(1, -1)
	h := moonhttp.Adaptive(g, nil)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic(http.ErrAbortHandler)
	}))
	func() {
		defer func() {
			if p := recover(); p != http.ErrAbortHandler {
				t.Errorf("recovered %v", p)
			}
		}()
		w := newRecorder()
		h.ServeHTTP(w, w.req)
	}()
	if s := g.Stats(); s.InFlight != 0 {
		t.Fatalf("%d in flight after the handler panicked", s.InFlight)
	}
	if err := g.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	w := newRecorder()
	moonhttp.Adaptive(g, nil)(ok).ServeHTTP(w, w.req)
	if w.Code != 503 || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("closed gate: %d, Retry-After %q; want 503, 1", w.Code, w.Header().Get("Retry-After"))
	}
}

// TestTransportSendsPriority: Transport sends the priority of the
// request's ctx in PriorityHeader, replacing what the request carried, and
// leaves the caller's request as it was; PriorityNormal sends nothing. A
// server behind Adaptive that calls another through Transport with its
// request's ctx passes the priority on.
func TestTransportSendsPriority(t *testing.T) {
	r := newRig(t)
	var mu sync.Mutex
	var seen []string
	back, _ := serve(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		seen = append(seen, strings.Join(req.Header.Values(moonhttp.PriorityHeader), ","))
		mu.Unlock()
	}))
	hc := &http.Client{Transport: &moonhttp.Transport{Engine: r.eng, Base: back.Client().Transport}}
	front, fc := serve(t, moonhttp.Adaptive(nil, nil)(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		out, _ := http.NewRequestWithContext(req.Context(), "GET", back.URL, nil)
		resp, err := hc.Do(out)
		if err != nil {
			t.Errorf("front to back: %v", err)
			return
		}
		resp.Body.Close()
	})))

	tests := []struct {
		ctx    client.Priority
		header string // on the request as made, "" for none
		want   string
	}{
		{client.PriorityLow, "", "low"},
		{client.PriorityNormal, "", ""},
		{client.PriorityHigh, "", "high"},
		{client.PriorityCritical, "", "critical"},
		{client.PriorityLow, "critical", "low"},
		{client.PriorityNormal, "high", "high"},
	}
	for i, tc := range tests {
		req, _ := http.NewRequestWithContext(client.WithPriority(context.Background(), tc.ctx), "GET", back.URL, nil)
		if tc.header != "" {
			req.Header.Set(moonhttp.PriorityHeader, tc.header)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		mu.Lock()
		got := seen[len(seen)-1]
		mu.Unlock()
		if got != tc.want {
			t.Errorf("step %d: %v with header %q arrived as %q, want %q", i, tc.ctx, tc.header, got, tc.want)
		}
		if h := req.Header.Get(moonhttp.PriorityHeader); h != tc.header {
			t.Errorf("step %d: the caller's request now says %q, want %q", i, h, tc.header)
		}
	}

	// Through the front server: its client's header reaches the back.
	req, _ := http.NewRequest("GET", front.URL, nil)
	req.Header.Set(moonhttp.PriorityHeader, "high")
	resp, err := fc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	got := seen[len(seen)-1]
	mu.Unlock()
	if got != "high" {
		t.Errorf("through the front server: %q arrived, want high", got)
	}
}

// TestAdaptiveInBubble: in a testing/synctest bubble, on the bubble's
// clock, a request waits in line while another runs for a second and then
// gets in; one whose deadline passes in line gets 503 and Retry-After: 1
// at its deadline.
func TestAdaptiveInBubble(t *testing.T) {
	inBubble(t, func(t *testing.T, eng *client.Engine) {
		g, err := client.NewAdaptiveGate(eng, client.AdaptiveConfig{Min: 1, Max: 1, Start: 1, Queue: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close(context.Background())
		h := moonhttp.Adaptive(g, nil)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			time.Sleep(time.Second)
			io.WriteString(w, "ok")
		}))
		start := time.Now()
		type done struct {
			w  *recorder
			at time.Duration
		}
		send := func(timeout time.Duration) <-chan done {
			ch := make(chan done, 1)
			go func() {
				w := newRecorder()
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				h.ServeHTTP(w, w.req.WithContext(ctx))
				ch <- done{w, time.Since(start)}
			}()
			synctest.Wait()
			return ch
		}
		first := send(time.Hour)
		patient := send(time.Hour)
		hasty := send(500 * time.Millisecond)
		if d := <-hasty; d.w.Code != 503 || d.w.Header().Get("Retry-After") != "1" || d.at != 500*time.Millisecond {
			t.Errorf("deadline in line: %d, Retry-After %q at %v; want 503, 1 at 500ms", d.w.Code, d.w.Header().Get("Retry-After"), d.at)
		}
		if d := <-first; d.w.Code != 200 || d.at != time.Second {
			t.Errorf("first: %d at %v, want 200 at 1s", d.w.Code, d.at)
		}
		if d := <-patient; d.w.Code != 200 || d.at != 2*time.Second {
			t.Errorf("patient: %d at %v, want 200 at 2s", d.w.Code, d.at)
		}
	})
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// TestAdaptiveAllocatesNothing: a request of normal priority, with the
// header or without, costs Adaptive no allocation when there is room.
func TestAdaptiveAllocatesNothing(t *testing.T) {
	r := newRig(t)
	g := r.fixedAdaptive(64, 0)
	h := moonhttp.Adaptive(g, nil)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	w := &discard{h: http.Header{}}
	for _, v := range []string{"", "normal", "Normal", "urgent"} {
		req := httptest.NewRequest("GET", "/", nil)
		if v != "" {
			req.Header.Set(moonhttp.PriorityHeader, v)
		}
		if a := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, req) }); a != 0 {
			t.Errorf("header %q: %v allocations a request", v, a)
		}
	}
}
