package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestQuotaAPI starts the program against a backend of its own and drives
// it as clients behind a trusted proxy would: each client gets its burst
// and then 429s with a Retry-After and the RateLimit fields, another client
// is served meanwhile, every answer came over one pooled backend
// connection, and cancelling ctx shuts everything down.
func TestQuotaAPI(t *testing.T) {
	b, err := startBackend("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan net.Addr, 1)
	done := make(chan error, 1)
	cfg := config{
		addr:    "127.0.0.1:0",
		backend: b.Addr(),
		rate:    0.01, // one request per 100 s after the burst: none comes back during the test
		burst:   3,
		conns:   2,
		trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	}
	go func() { done <- run(ctx, cfg, func(a net.Addr) { addrs <- a }) }()
	var url string
	select {
	case a := <-addrs:
		url = "http://" + a.String() + "/shout?text=hello"
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()

	call := func(client string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("X-Forwarded-For", client) // as a proxy on 127.0.0.1 would
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}

	for i := range 3 {
		resp, body := call("198.51.100.1")
		var got map[string]string
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &got) != nil || got["text"] != "HELLO" {
			t.Fatalf("request %d: %d %q, want 200 {\"text\":\"HELLO\"}", i, resp.StatusCode, body)
		}
		if want := `"default";r=` + strconv.Itoa(2-i); !strings.HasPrefix(resp.Header.Get("RateLimit"), want) {
			t.Fatalf("request %d: RateLimit %q, want %s...", i, resp.Header.Get("RateLimit"), want)
		}
	}
	resp, _ := call("198.51.100.1")
	// The next token is 100 s away, less the moments the test took.
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != 429 || err != nil || s < 90 || s > 100 {
		t.Fatalf("over quota: %d, Retry-After %q; want 429 and about 100", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp, body := call("198.51.100.2"); resp.StatusCode != 200 {
		t.Fatalf("another client: %d %q, want 200", resp.StatusCode, body)
	}
	if n := b.Accepted(); n != 1 {
		t.Fatalf("the backend took %d connections for four sequential requests, want 1 (pooled)", n)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run after cancel: %v", err)
	}
}
