package moonprom_test

import (
	"context"
	"fmt"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/moonprom"
	"github.com/prometheus/client_golang/prometheus"
)

// One collector per pool, in the registry a server exposes on /metrics
// (with promhttp.HandlerFor).
func ExampleNewPoolCollector() {
	eng := client.NewEngine()
	defer eng.Shutdown(context.Background())
	cfg := client.PoolConfig[*int]{
		Open:   func(context.Context) (*int, error) { return new(int), nil },
		Limits: client.DefaultLimits,
	}
	pool, _ := client.NewPool(eng, cfg)

	reg := prometheus.NewRegistry()
	reg.MustRegister(moonprom.NewPoolCollector(pool, "users-db"))

	c, _ := pool.Get(context.Background())
	defer pool.Put(c)
	families, _ := reg.Gather()
	for _, f := range families {
		switch f.GetName() {
		case "moonpool_pool_busy", "moonpool_pool_max_live", "moonpool_pool_made_total":
			m := f.GetMetric()[0]
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			fmt.Printf("%s{%s=%q} %v\n", f.GetName(), m.GetLabel()[0].GetName(), m.GetLabel()[0].GetValue(), v)
		}
	}
	// Output:
	// moonpool_pool_busy{pool="users-db"} 1
	// moonpool_pool_made_total{pool="users-db"} 1
	// moonpool_pool_max_live{pool="users-db"} 10
}
