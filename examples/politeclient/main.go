// Command politeclient calls a rate-limited HTTP API politely: the program
// to copy when a job must make many calls to somebody else's API without
// being banned from it.
//
//	go run ./examples/politeclient -url 'http://localhost:8080/shout?text=hi' -n 30 -rate 4
//
// (examples/quotaapi is such an API.) Three things make it polite, all in
// its http.Client's transport, a moonhttp.Transport:
//   - a client-side bucket holds the whole process to -rate requests a
//     second, however many goroutines call, so the server is not asked for
//     more than it will give;
//   - a 429 or 503 is waited out for the Retry-After the server sent, never
//     less, spread by jitter so that many clients told the same do not come
//     back together; other failures back off exponentially;
//   - only GETs are sent twice, and nothing waits past its deadline.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moonhttp"
)

// config is what the program is told on its command line.
type config struct {
	url  string
	n    int           // calls to make
	rate float64       // most calls a second from this process
	each time.Duration // the most one call may take, its waits included
	base http.RoundTripper
}

func main() {
	cfg := config{}
	flag.StringVar(&cfg.url, "url", "http://localhost:8080/shout?text=hi", "URL to GET")
	flag.IntVar(&cfg.n, "n", 20, "calls to make")
	flag.Float64Var(&cfg.rate, "rate", 4, "most calls a second")
	flag.DurationVar(&cfg.each, "timeout", time.Minute, "most one call may take, waits included")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	eng := client.NewEngine()
	defer eng.Shutdown(context.Background())
	if err := run(ctx, eng, cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run makes cfg.n GETs of cfg.url, one after another, and writes a line
// for each: its status and what the server says is left of the quota. It
// sleeps on eng's clock. It returns the first call that failed outright.
func run(ctx context.Context, eng *client.Engine, cfg config, out io.Writer) error {
	bucket, err := client.NewBucket(eng, cfg.rate, 1)
	if err != nil {
		return err
	}
	defer bucket.Close(context.Background())
	transport := &moonhttp.Transport{
		Base:   cfg.base,
		Engine: eng,
		Bucket: bucket,
		// Five attempts, 200 ms doubling to 5 s between them when the
		// server gives no Retry-After.
		Backoff: client.Backoff{Base: 200 * time.Millisecond, Factor: 2, Cap: 5 * time.Second, Attempts: 5, Jitter: client.Full},
		// A server that asks for more than a minute is down, not busy:
		// its answer is reported rather than waited for.
		MaxWait: time.Minute,
	}
	hc := &http.Client{Transport: transport}
	defer hc.CloseIdleConnections()

	for i := range cfg.n {
		if err := call(ctx, hc, cfg, i, out); err != nil {
			return err
		}
	}
	return nil
}

// call makes one GET within cfg.each and reports it.
func call(ctx context.Context, hc *http.Client, cfg config, i int, out io.Writer) error {
	if cfg.each > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.each)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("call %d: %w", i+1, err)
	}
	io.Copy(io.Discard, resp.Body) // read to the end, so the connection is reused
	resp.Body.Close()
	fmt.Fprintf(out, "call %d: %s (RateLimit: %s)\n", i+1, resp.Status, resp.Header.Get("RateLimit"))
	return nil
}
