package moonhttp_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moonhttp"
)

// TestConcurrency: past the gate's limit a request is refused at once with
// 503 and Retry-After: 1, never queued; room comes back when a request
// finishes, also when its handler panics.
func TestConcurrency(t *testing.T) {
	r := newRig(t)
	g, err := client.NewGate(r.eng, 2)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.Path {
		case "/block":
			entered <- struct{}{}
			<-release
		case "/panic":
			panic(http.ErrAbortHandler)
		}
		io.WriteString(w, "ok")
	})
	srv, c := serve(t, moonhttp.Concurrency(g)(h))

	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if f := get(t, c, srv.URL+"/block"); f.status != 200 {
				t.Errorf("a blocked request ended %d", f.status)
			}
		})
	}
	<-entered
	<-entered
	res := do(c, newReq(t, "GET", srv.URL, ""))
	if res.status != 503 || res.header.Get("Retry-After") != "1" || !strings.Contains(res.body, moonhttp.ProblemReducedCapacity) {
		t.Fatalf("full gate: %+v; want 503, Retry-After 1, a reduced-capacity problem", res)
	}
	close(release)
	wg.Wait()
	if held := g.Held(); held != 0 {
		t.Fatalf("%d held after both finished", held)
	}

	if _, err := c.Get(srv.URL + "/panic"); err == nil {
		t.Fatal("a panicking handler answered")
	}
	if held := g.Held(); held != 0 {
		t.Fatalf("%d held after a panic", held)
	}
	if f := get(t, c, srv.URL); f.status != 200 {
		t.Fatalf("after the panic: %d", f.status)
	}
}

// TestUnavailable: each of the pool's refusals is a 503 with the
// Retry-After it implies; anything else is left to the caller, unwritten.
func TestUnavailable(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		retry string // "" for not answered
	}{
		{"overloaded", client.ErrOverloaded, "1"},
		{"breaker", client.ErrBreaker, "1"},
		{"too many waiting", client.ErrTooManyWaiting, "1"},
		{"shed, wrapped", errFmt(client.ErrShed), "1"},
		{"closed", client.ErrClosed, "1"},
		{"held past the deadline", &client.WaitError{Wait: 2500 * time.Millisecond}, "3"},
		{"held for ever", &client.WaitError{Wait: 1 << 62}, "86400"},
		{"nil", nil, ""},
		{"ctx", errors.New("context canceled"), ""},
		{"open failed", &client.OpenError{Err: errors.New("refused")}, ""},
	}
	for _, tc := range tests {
		w := newRecorder()
		answered := moonhttp.Unavailable(w, w.req, tc.err)
		switch {
		case answered != (tc.retry != ""):
			t.Errorf("%s: answered %v", tc.name, answered)
		case answered && (w.Code != 503 || w.Header().Get("Retry-After") != tc.retry):
			t.Errorf("%s: %d, Retry-After %q; want 503, %s", tc.name, w.Code, w.Header().Get("Retry-After"), tc.retry)
		case !answered && (w.wrote || len(w.Header()) != 0):
			t.Errorf("%s: not answered, yet something was written", tc.name)
		}
	}
}
