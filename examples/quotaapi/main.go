// Command quotaapi is an HTTP API with a per-client quota in front of a
// pooled backend: the program to copy when a service talks to something
// over TCP (a cache, a legacy service, a database without a driver pool)
// and must not let one client use it all.
//
//	go run ./examples/quotaapi -addr :8080 -rate 5 -burst 10
//	curl -i 'localhost:8080/shout?text=hello'
//
// Each client (its address, read from X-Forwarded-For only when the
// request comes through a -trust'ed proxy) may make -burst requests at
// once and -rate a second after that; past it the answer is 429 with
// Retry-After and the RateLimit fields, which every answer carries. A
// request borrows a connection from a moonpool client.Pool, whose ward
// spaces out dials and backs off from a backend that fails; when the pool
// refuses (too many waiting, the breaker open) the answer is 503 with
// Retry-After. The backend is a line protocol that shouts back what it is
// sent; without -backend the program starts one of its own.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moonhttp"
)

// config is what the program is told on its command line.
type config struct {
	addr    string         // where to listen
	backend string         // the backend's address; "" starts one in-process
	rate    float64        // each client's requests a second
	burst   float64        // each client's requests at once
	conns   int            // the most backend connections; 0 or less is ten
	trusted []netip.Prefix // proxies whose X-Forwarded-For is believed
}

func main() {
	cfg := config{}
	var trust string
	flag.StringVar(&cfg.addr, "addr", "localhost:8080", "address to listen on")
	flag.StringVar(&cfg.backend, "backend", "", "backend address (host:port); empty starts one in-process")
	flag.Float64Var(&cfg.rate, "rate", 5, "requests a second per client")
	flag.Float64Var(&cfg.burst, "burst", 10, "requests at once per client")
	flag.IntVar(&cfg.conns, "conns", 10, "most backend connections")
	flag.StringVar(&trust, "trust", "", "comma-separated prefixes of trusted proxies, e.g. 10.0.0.0/8")
	flag.Parse()
	for p := range strings.SplitSeq(trust, ",") {
		if p = strings.TrimSpace(p); p != "" {
			pfx, err := netip.ParsePrefix(p)
			if err != nil {
				log.Fatalf("-trust: %v", err)
			}
			cfg.trusted = append(cfg.trusted, pfx)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, cfg, func(a net.Addr) { log.Printf("listening on http://%s/shout?text=hello", a) })
	if err != nil {
		log.Fatal(err)
	}
}

// run serves the API on cfg.addr until ctx ends, then shuts down: the
// server first (requests under way finish), then the engine, which closes
// the pool and its connections. ready is told the address once it listens.
func run(ctx context.Context, cfg config, ready func(net.Addr)) (err error) {
	if cfg.conns <= 0 {
		cfg.conns = client.DefaultLimits.Size
	}
	if cfg.backend == "" {
		b, err := startBackend("127.0.0.1:0")
		if err != nil {
			return err
		}
		defer b.Close()
		cfg.backend = b.Addr()
	}

	eng := client.NewEngine()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = errors.Join(err, eng.Shutdown(ctx))
	}()

	dialer := &net.Dialer{Timeout: 2 * time.Second}
	pool, err := client.NewPool(eng, client.PoolConfig[*conn]{
		Open: func(ctx context.Context) (*conn, error) {
			c, err := dialer.DialContext(ctx, "tcp", cfg.backend)
			if err != nil {
				return nil, err
			}
			return &conn{Conn: c, r: bufio.NewReader(c)}, nil
		},
		Close:  func(c *conn) error { return c.Close() },
		Limits: client.Limits{Size: cfg.conns, Idle: cfg.conns, Keep: 5 * time.Minute},
		// Dials spaced to twice the pool's size a second, held back after
		// a failure, refused at the rate a failing backend deserves.
		Ward: client.Ward{
			Bucket:  client.Rate{PerSecond: 2 * float64(cfg.conns), Burst: float64(cfg.conns)},
			Backoff: client.DefaultBackoff,
			Breaker: client.DefaultBreaker,
		},
		// A line four times the pool's size is a second or so of work;
		// past it a caller is better told 503 at once.
		MaxWaiting: 4 * cfg.conns,
	})
	if err != nil {
		return err
	}
	perClient, err := client.NewKeyedBucket(eng, cfg.rate, cfg.burst)
	if err != nil {
		return err
	}
	quota := moonhttp.Limit(perClient, moonhttp.BucketPolicy(cfg.rate, cfg.burst),
		moonhttp.WithKey(moonhttp.ClientIP(cfg.trusted...)))

	mux := http.NewServeMux()
	mux.Handle("GET /shout", shout(pool))

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: quota(mux), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	ready(ln.Addr())

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	down, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(down)
	<-served
	return err
}

// shout answers GET /shout?text=... with the backend's answer, on a
// connection borrowed from pool.
func shout(pool *client.Pool[*conn]) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		text := strings.ReplaceAll(r.URL.Query().Get("text"), "\n", " ")
		c, err := pool.Get(r.Context())
		if moonhttp.Unavailable(w, r, err) {
			return // the pool refused: 503 with Retry-After
		}
		if err != nil {
			http.Error(w, "backend unreachable", http.StatusBadGateway)
			return
		}
		answer, err := c.ask(text)
		if err != nil {
			pool.Discard(c) // broken: closed, and its room freed
			http.Error(w, "backend failed", http.StatusBadGateway)
			return
		}
		pool.Put(c)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"text": answer})
	})
}

// conn is one backend connection. A pool holds pointers, so each
// connection is told apart by identity.
type conn struct {
	net.Conn
	r *bufio.Reader
}

// ask sends a line and reads the answer, within a second.
func (c *conn) ask(line string) (string, error) {
	if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return "", err
	}
	if _, err := fmt.Fprintf(c, "%s\n", line); err != nil {
		return "", err
	}
	answer, err := c.r.ReadString('\n')
	return strings.TrimSuffix(answer, "\n"), err
}

// backend is the in-process stand-in for a real backend: a TCP server that
// answers every line with the line in capitals.
type backend struct {
	ln       net.Listener
	accepted atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

func startBackend(addr string) (*backend, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	b := &backend{ln: ln, conns: map[net.Conn]struct{}{}}
	b.wg.Go(b.accept)
	return b, nil
}

// Addr is where the backend listens.
func (b *backend) Addr() string { return b.ln.Addr().String() }

// Accepted is how many connections the backend has taken.
func (b *backend) Accepted() int64 { return b.accepted.Load() }

func (b *backend) accept() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.accepted.Add(1)
		b.mu.Lock()
		b.conns[c] = struct{}{}
		b.mu.Unlock()
		b.wg.Go(func() {
			defer func() {
				b.mu.Lock()
				delete(b.conns, c)
				b.mu.Unlock()
				c.Close()
			}()
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if _, err := c.Write([]byte(strings.ToUpper(line))); err != nil {
					return
				}
			}
		})
	}
}

// Close stops the backend and ends its connections, waiting for its
// goroutines.
func (b *backend) Close() error {
	err := b.ln.Close()
	b.mu.Lock()
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
	return err
}
