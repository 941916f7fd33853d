package moonhttp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moonhttp"
)

// ok is a handler that answers 200 "ok".
var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })

// fields is what a response said about its quota.
type fields struct {
	status                  int
	policy, limit, retry    string
	xLimit, xRemain, xReset string
}

// step is a request at an instant and what it should be told.
type step struct {
	at   time.Duration
	want fields
}

// walk makes each step's request at its instant, moving the clock on.
func (r *rig) walk(c *http.Client, url string, steps []step) {
	r.t.Helper()
	for i, s := range steps {
		if d := s.at - r.at(); d > 0 {
			r.clock.Advance(d)
		}
		if got := get(r.t, c, url); got != s.want {
			r.t.Errorf("step %d at %v: %+v, want %+v", i, s.at, got, s.want)
		}
	}
}

func get(t *testing.T, c *http.Client, url string, hdr ...string) fields {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	h := resp.Header
	return fields{resp.StatusCode, h.Get("RateLimit-Policy"), h.Get("RateLimit"), h.Get("Retry-After"),
		h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset")}
}

// TestLimitBucketFields walks a bucket of 2/s with a burst of 3 through
// fixed instants, through a real server and client: the status, the
// RateLimit fields and Retry-After are exact at every step.
func TestLimitBucketFields(t *testing.T) {
	r := newRig(t)
	kb, err := client.NewKeyedBucket(r.eng, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	srv, c := serve(t, moonhttp.Limit(kb, moonhttp.BucketPolicy(2, 3))(ok))
	const pol = `"default";q=3;w=2`
	ms := time.Millisecond
	r.walk(c, srv.URL, []step{
		{0, fields{200, pol, `"default";r=2;t=1`, "", "", "", ""}},
		{0, fields{200, pol, `"default";r=1;t=1`, "", "", "", ""}},
		{0, fields{200, pol, `"default";r=0;t=2`, "", "", "", ""}},
		{0, fields{429, pol, `"default";r=0;t=1`, "1", "", "", ""}},        // a token in 500 ms
		{250 * ms, fields{429, pol, `"default";r=0;t=1`, "1", "", "", ""}}, // in 250 ms: still 1 s
		{500 * ms, fields{200, pol, `"default";r=0;t=2`, "", "", "", ""}},
		{500 * ms, fields{429, pol, `"default";r=0;t=1`, "1", "", "", ""}},
		{3 * time.Second, fields{200, pol, `"default";r=2;t=1`, "", "", "", ""}}, // full again
	})
}

// TestLimitWindowFields: a window of 2 a minute, with the legacy fields
// too; a refusal's t and Retry-After are the wait until the oldest request
// leaves the window.
func TestLimitWindowFields(t *testing.T) {
	r := newRig(t)
	kw, err := client.NewKeyedWindow(r.eng, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	p := moonhttp.WindowPolicy(2, time.Minute)
	p.Name = "per-minute"
	srv, c := serve(t, moonhttp.Limit(kw, p, moonhttp.WithLegacyHeaders())(ok))
	const pol = `"per-minute";q=2;w=60`
	r.walk(c, srv.URL, []step{
		{0, fields{200, pol, `"per-minute";r=1;t=60`, "", "2", "1", "60"}},
		{10 * time.Second, fields{200, pol, `"per-minute";r=0;t=60`, "", "2", "0", "60"}},
		{20 * time.Second, fields{429, pol, `"per-minute";r=0;t=40`, "40", "2", "0", "40"}},
		{59*time.Second + 500*time.Millisecond, fields{429, pol, `"per-minute";r=0;t=1`, "1", "2", "0", "1"}},
		{60 * time.Second, fields{200, pol, `"per-minute";r=0;t=60`, "", "2", "0", "60"}},
		{70 * time.Second, fields{200, pol, `"per-minute";r=0;t=60`, "", "2", "0", "60"}},
		{70 * time.Second, fields{429, pol, `"per-minute";r=0;t=50`, "50", "2", "0", "50"}},
	})
}

// TestLimitBurst: N+k requests at once from one client get exactly k
// 429s, each with a Retry-After, while another client keeps its own quota.
func TestLimitBurst(t *testing.T) {
	const n, k = 20, 7
	r := newRig(t)
	kb, _ := client.NewKeyedBucket(r.eng, 1, n)
	key := moonhttp.ClientIP(netip.MustParsePrefix("127.0.0.0/8"))
	srv, c := serve(t, moonhttp.Limit(kb, moonhttp.BucketPolicy(1, n), moonhttp.WithKey(key))(ok))

	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range n + k {
		wg.Go(func() {
			f := get(t, c, srv.URL, "X-Forwarded-For", "198.51.100.1")
			mu.Lock()
			defer mu.Unlock()
			codes[f.status]++
			if f.status == 429 && f.retry != "1" {
				t.Errorf("429 with Retry-After %q, want 1", f.retry)
			}
		})
	}
	wg.Wait()
	if codes[200] != n || codes[429] != k || len(codes) != 2 {
		t.Fatalf("statuses %v, want %d × 200 and %d × 429", codes, n, k)
	}
	if f := get(t, c, srv.URL, "X-Forwarded-For", "198.51.100.2"); f.status != 200 || f.limit != `"default";r=19;t=1` {
		t.Fatalf("another client: %+v, want 200 with 19 left", f)
	}
}

// TestLimitProblem: the default refusal is an RFC 9457 problem naming the
// policy, and a HEAD gets the headers without the body.
func TestLimitProblem(t *testing.T) {
	r := newRig(t)
	kw, _ := client.NewKeyedWindow(r.eng, 1, time.Hour)
	srv, c := serve(t, moonhttp.Limit(kw, moonhttp.WindowPolicy(1, time.Hour))(ok))
	get(t, c, srv.URL)
	res := do(c, newReq(t, "GET", srv.URL, ""))
	if res.status != 429 || res.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%d %q, want 429 application/problem+json", res.status, res.header.Get("Content-Type"))
	}
	want := `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota exceeded",` +
		`"status":429,"detail":"retry after 3600 s","violated-policies":["default"]}` + "\n"
	if res.body != want {
		t.Fatalf("body\n%s\nwant\n%s", res.body, want)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(res.body), &p); err != nil {
		t.Fatal(err)
	}

	res = do(c, newReq(t, "HEAD", srv.URL, ""))
	if res.status != 429 || res.body != "" || res.header.Get("Retry-After") != "3600" {
		t.Fatalf("HEAD: %+v; want 429, no body, Retry-After 3600", res)
	}
}

// TestLimitReject: a RejectFunc of the user's writes the refusal, with the
// headers already set and the handler not run.
func TestLimitReject(t *testing.T) {
	r := newRig(t)
	kb, _ := client.NewKeyedBucket(r.eng, 1, 1)
	var ran atomic.Int32
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { ran.Add(1) })
	seen := make(chan moonhttp.Rejection, 1)
	mine := func(w http.ResponseWriter, _ *http.Request, rej moonhttp.Rejection) {
		seen <- rej
		if w.Header().Get("Retry-After") == "" || w.Header().Get("RateLimit") == "" {
			t.Error("the fields were not set before the RejectFunc ran")
		}
		w.WriteHeader(rej.Status)
		io.WriteString(w, "slow down")
	}
	srv, c := serve(t, moonhttp.Limit(kb, moonhttp.BucketPolicy(1, 1), moonhttp.WithReject(mine))(next))
	get(t, c, srv.URL)
	res := do(c, newReq(t, "GET", srv.URL, ""))
	if res.status != 429 || res.body != "slow down" || ran.Load() != 1 {
		t.Fatalf("%+v, handler ran %d times; want 429 \"slow down\", once", res, ran.Load())
	}
	if rej := <-seen; rej != (moonhttp.Rejection{Status: 429, RetryAfter: 1, Policy: "default"}) {
		t.Fatalf("rejection %+v", rej)
	}
}

// TestLimitHeaderKey: keyed by an API key, each key has its own quota and
// requests without one share the empty key's.
func TestLimitHeaderKey(t *testing.T) {
	r := newRig(t)
	kw, _ := client.NewKeyedWindow(r.eng, 1, time.Minute)
	srv, c := serve(t, moonhttp.Limit(kw, moonhttp.WindowPolicy(1, time.Minute), moonhttp.WithKey(moonhttp.Header("X-API-Key")))(ok))
	got := []int{
		get(t, c, srv.URL, "X-API-Key", "a").status,
		get(t, c, srv.URL, "X-API-Key", "a").status,
		get(t, c, srv.URL, "X-API-Key", "b").status,
		get(t, c, srv.URL).status,
		get(t, c, srv.URL).status,
	}
	want := []int{200, 429, 200, 200, 429}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("statuses %v, want %v", got, want)
		}
	}
}

// TestLimitClosed: a limiter shut down with the server is the server's
// state, not the client's quota. Every request gets 503 with the short
// Retry-After a closed pool gets, and no RateLimit fields. A quota that
// never comes back says 429 and a day while open, and 503 once closed.
func TestLimitClosed(t *testing.T) {
	r := newRig(t)
	kb, _ := client.NewKeyedBucket(r.eng, 1, 5)
	kw, _ := client.NewKeyedWindow(r.eng, 2, time.Hour)
	never, _ := client.NewKeyedBucket(r.eng, 0, 1)
	neverH := moonhttp.Limit(never, moonhttp.BucketPolicy(0, 1))(ok)
	srv, c := serve(t, neverH)
	get(t, c, srv.URL) // its one token
	if got, want := get(t, c, srv.URL), (fields{429, `"default";q=1`, `"default";r=0;t=86400`, "86400", "", "", ""}); got != want {
		t.Errorf("a quota that never comes back, open: %+v, want %+v", got, want)
	}
	tests := []struct {
		name string
		h    http.Handler
	}{
		{"bucket", moonhttp.Limit(kb, moonhttp.BucketPolicy(1, 5))(ok)},
		{"window", moonhttp.Limit(kw, moonhttp.WindowPolicy(2, time.Hour), moonhttp.WithLegacyHeaders())(ok)},
		{"a quota that never comes back", neverH},
	}
	for _, l := range []interface{ Close(context.Context) error }{kb, kw, never} {
		if err := l.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	closed := fields{503, "", "", "1", "", "", ""}
	for _, tc := range tests {
		srv, c := serve(t, tc.h)
		if got := get(t, c, srv.URL); got != closed {
			t.Errorf("%s, closed: %+v, want %+v", tc.name, got, closed)
		}
	}
	srv, c = serve(t, tests[0].h)
	res := do(c, newReq(t, "GET", srv.URL, ""))
	if !strings.Contains(res.body, moonhttp.ProblemReducedCapacity) {
		t.Errorf("closed: body %s, want the reduced-capacity problem", res.body)
	}
}

// TestLimitEngineShutDown: a limiter whose engine has shut down answers as
// a closed one does.
func TestLimitEngineShutDown(t *testing.T) {
	r := newRig(t)
	kw, _ := client.NewKeyedWindow(r.eng, 5, time.Minute)
	srv, c := serve(t, moonhttp.Limit(kw, moonhttp.WindowPolicy(5, time.Minute))(ok))
	if f := get(t, c, srv.URL); f.status != 200 {
		t.Fatalf("open: %+v, want 200", f)
	}
	if err := r.eng.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if f := get(t, c, srv.URL); f != (fields{503, "", "", "1", "", "", ""}) {
		t.Fatalf("after Shutdown: %+v, want 503 with Retry-After 1 and no RateLimit fields", f)
	}
}

// TestLimitNilPointer: a limiter whose constructor failed, a nil pointer in
// the interface, refuses nothing and sets no fields, as a nil one does.
func TestLimitNilPointer(t *testing.T) {
	var kb *client.KeyedBucket
	var kw *client.KeyedWindow
	for _, tc := range []struct {
		name string
		l    moonhttp.Limiter
		p    moonhttp.Policy
	}{
		{"nil", nil, moonhttp.BucketPolicy(1, 1)},
		{"nil *KeyedBucket", kb, moonhttp.BucketPolicy(1, 1)},
		{"nil *KeyedWindow", kw, moonhttp.WindowPolicy(1, time.Minute)},
	} {
		w := newRecorder()
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: panicked: %v", tc.name, p)
				}
			}()
			moonhttp.Limit(tc.l, tc.p)(ok).ServeHTTP(w, w.req)
		}()
		if w.Code != 200 || w.Body.String() != "ok" || w.Header().Get("RateLimit") != "" {
			t.Errorf("%s: %d %q, RateLimit %q; want 200 \"ok\" and no fields", tc.name, w.Code, w.Body, w.Header().Get("RateLimit"))
		}
	}
}

// TestLimitLongWindow: a window longer than a day is advertised as it is.
// A client that spends q and then waits w, as the fields tell it, is
// never refused.
func TestLimitLongWindow(t *testing.T) {
	r := newRig(t)
	kw, _ := client.NewKeyedWindow(r.eng, 3, 48*time.Hour)
	srv, c := serve(t, moonhttp.Limit(kw, moonhttp.WindowPolicy(3, 48*time.Hour))(ok))
	var w time.Duration
	for round := range 3 {
		for i := range 3 {
			f := get(t, c, srv.URL)
			if f.status != 200 {
				t.Fatalf("round %d, request %d: %+v; want 200 for a client within the advertised quota", round, i, f)
			}
			if f.policy != `"default";q=3;w=172800` {
				t.Errorf("round %d: RateLimit-Policy %s, want w=172800", round, f.policy)
			}
			_, ws, _ := strings.Cut(f.policy, ";w=")
			secs, err := strconv.Atoi(ws)
			if err != nil {
				t.Fatal(err)
			}
			w = time.Duration(secs) * time.Second
		}
		r.clock.Advance(w)
	}
}

// TestWriteProblemTypes: each status gets its problem type; one the draft
// names none for gets RFC 9457's default, titled with the status text.
func TestWriteProblemTypes(t *testing.T) {
	tests := []struct {
		rej        moonhttp.Rejection
		typ, title string
	}{
		{moonhttp.Rejection{Status: 429, RetryAfter: 2, Policy: "p"}, moonhttp.ProblemQuotaExceeded, "Quota exceeded"},
		{moonhttp.Rejection{Status: 503, RetryAfter: 1}, moonhttp.ProblemReducedCapacity, "Over capacity for now"},
		{moonhttp.Rejection{Status: 403, RetryAfter: 1}, "about:blank", "Forbidden"},
	}
	for _, tc := range tests {
		w := newRecorder()
		moonhttp.WriteProblem(w, w.req, tc.rej)
		var p struct {
			Type, Title string
			Status      int
		}
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Type != tc.typ || p.Title != tc.title || p.Status != tc.rej.Status || w.Code != tc.rej.Status {
			t.Errorf("%d: %d %s (%v), want type %s, title %q", tc.rej.Status, w.Code, w.Body, err, tc.typ, tc.title)
		}
	}
}

// TestLimitFollowsRetune: the RateLimit-Policy and RateLimit fields read a
// retuned limiter's numbers, not the Policy's it was made with.
func TestLimitFollowsRetune(t *testing.T) {
	r := newRig(t)
	kb, err := client.NewKeyedBucket(r.eng, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	srv, c := serve(t, moonhttp.Limit(kb, moonhttp.BucketPolicy(2, 3))(ok))
	r.walk(c, srv.URL, []step{
		{0, fields{200, `"default";q=3;w=2`, `"default";r=2;t=1`, "", "", "", ""}},
	})
	if err := kb.SetBurst(10); err != nil {
		t.Fatal(err)
	}
	if err := kb.SetLimit(5); err != nil {
		t.Fatal(err)
	}
	// 2 held, up to 10 at 5/s: full in 2 s.
	r.walk(c, srv.URL, []step{
		{0, fields{200, `"default";q=10;w=2`, `"default";r=1;t=2`, "", "", "", ""}},
	})

	kw, err := client.NewKeyedWindow(r.eng, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	srv, c = serve(t, moonhttp.Limit(kw, moonhttp.WindowPolicy(2, time.Minute))(ok))
	if err := kw.SetAllow(5); err != nil {
		t.Fatal(err)
	}
	r.walk(c, srv.URL, []step{
		{0, fields{200, `"default";q=5;w=60`, `"default";r=4;t=60`, "", "", "", ""}},
	})
}
