package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/moonpool-go/moonpool/client"
)

// An adaptive gate in front of a handler. The caller's priority comes in
// a header; a refused caller gets a 503 at once.
func ExampleAdaptiveGate() {
	eng := client.NewEngine()
	defer eng.Shutdown(context.Background())
	gate, err := client.NewAdaptiveGate(eng, client.AdaptiveConfig{Healthy: 50 * time.Millisecond})
	if err != nil {
		panic(err)
	}

	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if p, err := client.ParsePriority(r.Header.Get("Priority")); err == nil {
			ctx = client.WithPriority(ctx, p)
		}
		pass, err := gate.Enter(ctx)
		if err != nil {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		defer pass.Leave() // measures the call and gives the room back
		fmt.Fprintln(w, "hello")
	})

	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Priority", "high")
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	fmt.Print(rec.Code, " ", rec.Body.String())

	s := gate.Stats()
	fmt.Println("limit", s.Limit, "in flight", s.InFlight)
	fmt.Println("high let in", s.Classes[client.PriorityHigh-client.PriorityLow].Entered)
	// Output:
	// 200 hello
	// limit 20 in flight 0
	// high let in 1
}
