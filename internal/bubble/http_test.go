package bubble_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/moonhttp"
	"github.com/moonpool-go/moonpool/policy"
)

// serve runs one request from addr through h and returns the response.
func serve(h http.Handler, addr string) *http.Response {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = addr
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

// TestLimit: moonhttp.Limit lets each client its burst, refuses the next
// with Retry-After, and lets it in again once that time has passed.
func TestLimit(t *testing.T) {
	inBubbles(t, func(t *testing.T, eng *engine.Engine) {
		k, err := client.NewKeyedBucket(eng, 0.5, 2)
		must(t, err)
		defer k.Close(context.Background())
		served := 0
		h := moonhttp.Limit(k, moonhttp.BucketPolicy(0.5, 2))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served++
			w.WriteHeader(http.StatusNoContent)
		}))
		const one, other = "192.0.2.1:1234", "198.51.100.7:4321"
		for i := range 2 {
			if code := serve(h, one).StatusCode; code != http.StatusNoContent {
				t.Fatalf("request %d of the burst: %d", i, code)
			}
		}
		resp := serve(h, one)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
			t.Fatalf("past the burst: %d, Retry-After %q; want 429 and 2", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		if code := serve(h, other).StatusCode; code != http.StatusNoContent {
			t.Fatalf("another client refused for the first one's use: %d", code)
		}
		time.Sleep(2 * time.Second)
		if code := serve(h, one).StatusCode; code != http.StatusNoContent {
			t.Fatalf("after the Retry-After: %d", code)
		}
		if served != 4 {
			t.Fatalf("the handler ran %d times, want 4", served)
		}
	})
}

// TestLimitWindow: moonhttp.Limit on a window says how long until the
// oldest request leaves it.
func TestLimitWindow(t *testing.T) {
	inBubbles(t, func(t *testing.T, eng *engine.Engine) {
		k, err := client.NewKeyedWindow(eng, 1, time.Minute)
		must(t, err)
		defer k.Close(context.Background())
		h := moonhttp.Limit(k, moonhttp.WindowPolicy(1, time.Minute))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		const addr = "192.0.2.1:1234"
		serve(h, addr)
		time.Sleep(15 * time.Second)
		resp := serve(h, addr)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "45" {
			t.Fatalf("second request: %d, Retry-After %q; want 429 and 45", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		time.Sleep(45 * time.Second)
		if code := serve(h, addr).StatusCode; code != http.StatusOK {
			t.Fatalf("after the Retry-After: %d", code)
		}
	})
}

// stub is a backend that answers with codes in turn (200 once they run
// out), each 503 with Retry-After: 30, and notes when each attempt came.
type stub struct {
	codes []int
	start time.Time
	at    []time.Duration
}

func (s *stub) RoundTrip(r *http.Request) (*http.Response, error) {
	s.at = append(s.at, time.Since(s.start))
	code := http.StatusOK
	if len(s.codes) > 0 {
		code, s.codes = s.codes[0], s.codes[1:]
	}
	h := http.Header{}
	if code == http.StatusServiceUnavailable {
		h.Set("Retry-After", "30")
	}
	return &http.Response{
		StatusCode: code,
		Status:     http.StatusText(code),
		Header:     h,
		Body:       io.NopCloser(strings.NewReader("")),
		Request:    r,
	}, nil
}

// get sends one GET through rt with ctx.
func get(t *testing.T, ctx context.Context, rt http.RoundTripper) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://backend.invalid/", nil)
	must(t, err)
	resp, err := rt.RoundTrip(req)
	must(t, err)
	resp.Body.Close()
	return resp
}

// TestTransport: moonhttp.Transport waits out a 503's Retry-After of 30s,
// spread by at most a tenth of it, and answers with what finally came.
// With too little time left it returns the 503 at once.
func TestTransport(t *testing.T) {
	inBubbles(t, func(t *testing.T, eng *engine.Engine) {
		s := &stub{codes: []int{503, 503}, start: time.Now()}
		tr := &moonhttp.Transport{Base: s, Engine: eng, Backoff: policy.DefaultBackoff}
		if code := get(t, context.Background(), tr).StatusCode; code != http.StatusOK {
			t.Fatalf("after two 503s: %d, want 200", code)
		}
		if len(s.at) != 3 {
			t.Fatalf("%d attempts, want 3", len(s.at))
		}
		for i := 1; i < 3; i++ {
			if gap := s.at[i] - s.at[i-1]; gap < 30*time.Second || gap > 33*time.Second {
				t.Fatalf("attempt %d came %v after the one before, want 30s to 33s", i, gap)
			}
		}

		s.codes = []int{503}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var code int
		if got := took(func() { code = get(t, ctx, tr).StatusCode }); got != 0 || code != http.StatusServiceUnavailable {
			t.Fatalf("with 10s left: %d after %v, want the 503 at once", code, got)
		}
	})
}

// TestTransportBucket: a Transport with a Bucket of 2 a second sends five
// requests in two seconds of fake time, one every 500ms after the first.
func TestTransportBucket(t *testing.T) {
	inBubbles(t, func(t *testing.T, eng *engine.Engine) {
		b, err := client.NewBucket(eng, 2, 1)
		must(t, err)
		defer b.Close(context.Background())
		s := &stub{start: time.Now()}
		tr := &moonhttp.Transport{Base: s, Engine: eng, Bucket: b}
		for range 5 {
			get(t, context.Background(), tr)
		}
		for i, at := range s.at {
			if want := time.Duration(i) * 500 * time.Millisecond; at != want {
				t.Fatalf("request %d sent at %v, want %v", i, at, want)
			}
		}
	})
}
