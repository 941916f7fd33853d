package moonhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moonhttp"
)

// An adaptive gate in front of a handler. A caller marks how important a
// request is in its ctx; Transport sends that in the Moonpool-Priority
// header, and Adaptive puts it back in the handler's ctx. Under overload
// the gate refuses low requests first.
func ExampleAdaptive() {
	eng := client.NewEngine()
	defer eng.Shutdown(context.Background())

	gate, _ := client.NewAdaptiveGate(eng, client.AdaptiveConfig{})
	defer gate.Close(context.Background())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, client.PriorityFrom(r.Context()).String())
	})
	srv := httptest.NewServer(moonhttp.Adaptive(gate, nil)(h))
	defer srv.Close()

	hc := &http.Client{Transport: &moonhttp.Transport{Engine: eng, Base: srv.Client().Transport}}
	for _, p := range []client.Priority{client.PriorityLow, client.PriorityNormal, client.PriorityCritical} {
		ctx := client.WithPriority(context.Background(), p)
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
		resp, err := hc.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body))
	}
	// Output:
	// 200 low
	// 200 normal
	// 200 critical
}
