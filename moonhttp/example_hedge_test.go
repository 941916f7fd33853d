package moonhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moonhttp"
)

// A GET whose first attempt hangs is sent again after 10 ms, under a
// retry budget. The copy's answer comes back, and the first attempt is
// cancelled. Without a fixed Delay, the hedge waits for the budget's
// 95th percentile of the latency it has seen.
func ExampleHedge() {
	eng := client.NewEngine()
	defer eng.Shutdown(context.Background())
	budget, _ := client.NewBudget(eng, client.BudgetConfig{})

	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			<-r.Context().Done() // a slow disk, a long GC pause
			return
		}
		io.WriteString(w, "fresh data")
	}))
	defer srv.Close()

	hc := &http.Client{Transport: &moonhttp.Transport{
		Base:   srv.Client().Transport,
		Engine: eng,
		Budget: budget,
		Hedge:  &client.Hedge{Delay: 10 * time.Millisecond},
	}}
	resp, err := hc.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body), "hedges:", budget.Stats().Hedges)
	// Output:
	// 200 fresh data hedges: 1
}
