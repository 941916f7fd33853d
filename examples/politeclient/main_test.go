package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/internal/vclock"
	"github.com/moonpool-go/moonpool/moonhttp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// limited is a server held to a quota of one request a second in bursts of
// two, on the test's clock, that remembers when it told the client to come
// back and counts the requests that came earlier.
type limited struct {
	clock *vclock.Virtual
	quota *client.Bucket

	mu       sync.Mutex
	arrivals []int64
	refused  int
	early    int   // requests that came before the Retry-After they were given
	back     int64 // when the last refusal said to come back
}

func (l *limited) Try(string) client.Decision { return l.quota.Try() }

func (l *limited) handler() http.Handler {
	reject := func(w http.ResponseWriter, r *http.Request, rej moonhttp.Rejection) {
		l.mu.Lock()
		l.refused++
		l.back = l.clock.Now() + int64(rej.RetryAfter)*int64(time.Second)
		l.mu.Unlock()
		moonhttp.WriteProblem(w, r, rej)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("hi\n")) })
	limit := moonhttp.Limit(l, moonhttp.BucketPolicy(1, 2), moonhttp.WithReject(reject))(ok)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := l.clock.Now()
		l.mu.Lock()
		l.arrivals = append(l.arrivals, now)
		if now < l.back {
			l.early++
		}
		l.mu.Unlock()
		limit.ServeHTTP(w, r)
	})
}

// TestPoliteClient runs the program against a rate-limited server on a
// virtual clock: every call ends 200, the server refused some attempts
// but none came back before its Retry-After, and no two requests left
// closer together than the client's own rate allows.
func TestPoliteClient(t *testing.T) {
	clock := vclock.NewVirtual()
	eng := client.NewEngine(client.WithClock(clock))
	defer eng.Shutdown(context.Background())
	quota, err := client.NewBucket(eng, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	srv := &limited{clock: clock, quota: quota}
	ts := httptest.NewServer(srv.handler())
	defer ts.Close()

	const calls = 6
	var out strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), eng, config{url: ts.URL, n: calls, rate: 10, each: time.Minute, base: ts.Client().Transport}, &out)
	}()
	// Move the clock on whenever the program waits, until it is done.
	for finished := false; !finished; {
		waiting, stop := context.WithCancel(t.Context())
		pend := make(chan error, 1)
		go func() { pend <- clock.WaitPending(waiting, 1) }()
		select {
		case err := <-done:
			stop()
			<-pend
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			finished = true
		case err := <-pend:
			stop()
			if err != nil {
				t.Fatal(err)
			}
			clock.AdvanceNext()
		}
	}

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != calls {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), calls, out.String())
	}
	for _, l := range lines {
		if !strings.Contains(l, "200 OK") || !strings.Contains(l, `RateLimit: "default";r=`) {
			t.Errorf("line %q: want a 200 with its RateLimit", l)
		}
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.refused == 0 || srv.early != 0 {
		t.Fatalf("%d refused, %d came back early; want some refused and none early", srv.refused, srv.early)
	}
	for i := 1; i < len(srv.arrivals); i++ {
		if gap := time.Duration(srv.arrivals[i] - srv.arrivals[i-1]); gap < 100*time.Millisecond {
			t.Fatalf("requests %d and %d %v apart, closer than the client's 10/s", i-1, i, gap)
		}
	}
	t.Logf("%d attempts for %d calls, %d refused, in %v\n%s", len(srv.arrivals), calls, srv.refused,
		time.Duration(srv.arrivals[len(srv.arrivals)-1]-srv.arrivals[0]), out.String())
}
