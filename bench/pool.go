package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/puddle/v2"
	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// conn is the resource every pool lends: nothing to open or close, so
// what is measured is the lending alone.
type conn struct{ id int }

// poolRows are the Pool suite: Get and Put back on a pool kept full, so
// every caller is lent an idle resource or waits for one, at size 10 (the
// default of database/sql and HikariCP) and at 1,000.
func poolRows(eng *engine.Engine, cfg config) []row {
	var rows []row
	for _, size := range []int{10, 1000} {
		rows = append(rows, row{
			suite:   "Pool",
			name:    fmt.Sprintf("size=%d", size),
			callers: cfg.callers,
			sides: []side{
				{name: "moonpool", ours: true, build: func(int) (contender, error) { return oursPool(eng, size) }},
				{name: "puddle", build: func(int) (contender, error) { return puddlePool(size) }},
				{name: "chan", build: func(int) (contender, error) { return chanPool(size), nil }},
				{name: "protoactor", build: func(int) (contender, error) { return protoPool(size), nil }},
				{name: "goroutine", build: func(int) (contender, error) { return chanOwnerPool(size), nil }},
				{name: "mutex", build: func(int) (contender, error) { return mutexPool(size), nil }},
			},
			batch: 4,
			every: 16,
		})
	}
	return rows
}

// oursPool is a client.Pool of size resources, all made up front.
func oursPool(eng *engine.Engine, size int) (contender, error) {
	p, err := client.NewPool(eng, client.PoolConfig[*conn]{
		Open:   func(context.Context) (*conn, error) { return new(conn), nil },
		Limits: policy.Limits{Size: size, Idle: size},
	})
	if err != nil {
		return contender{}, err
	}
	ctx := context.Background()
	held := make([]*conn, 0, size)
	for range size {
		c, err := p.Get(ctx)
		if err != nil {
			_ = p.Close(ctx)
			return contender{}, err
		}
		held = append(held, c)
	}
	for _, c := range held {
		if err := p.Put(c); err != nil {
			_ = p.Close(ctx)
			return contender{}, err
		}
	}
	var errs atomic.Int64
	return contender{
		run: func(n int) {
			for range n {
				c, err := p.Get(ctx)
				if err != nil {
					errs.Add(1)
					continue
				}
				if p.Put(c) != nil {
					errs.Add(1)
				}
			}
		},
		close: func() { closeWithin(p.Close) },
		errs:  errs.Load,
	}, nil
}

// puddlePool is a puddle pool of size resources, all made up front.
func puddlePool(size int) (contender, error) {
	p, err := puddle.NewPool(&puddle.Config[*conn]{
		Constructor: func(context.Context) (*conn, error) { return new(conn), nil },
		Destructor:  func(*conn) {},
		MaxSize:     int32(size),
	})
	if err != nil {
		return contender{}, err
	}
	ctx := context.Background()
	for range size {
		if err := p.CreateResource(ctx); err != nil {
			p.Close()
			return contender{}, err
		}
	}
	var errs atomic.Int64
	return contender{
		run: func(n int) {
			for range n {
				r, err := p.Acquire(ctx)
				if err != nil {
					errs.Add(1)
					continue
				}
				r.Release()
			}
		},
		close: p.Close,
		errs:  errs.Load,
	}, nil
}

// chanPool is the floor: a buffered channel holding size resources,
// received to borrow and sent to give back. No limits, no ageing, no
// waiting in line beyond what the runtime does.
func chanPool(size int) contender {
	ch := make(chan *conn, size)
	for i := range size {
		ch <- &conn{id: i}
	}
	return contender{
		run: func(n int) {
			for range n {
				c := <-ch
				ch <- c
			}
		},
		close: func() {},
	}
}

// closeWithin closes with a few seconds to spare: what a pool holds is
// already back by the time a row ends.
func closeWithin(close func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := close(ctx); err != nil && !errors.Is(err, client.ErrClosed) {
		warn("close: %v", err)
	}
}
