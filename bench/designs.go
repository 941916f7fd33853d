package main

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/moonpool-go/moonpool/policy"
)

// The other ways a Go programmer could give a pool's books one owner, for
// the Pool suite: stock protoactor with a reply channel, a goroutine owning
// the books behind channels (the Go idiom), and, as a reference the
// library does not allow itself, the same books under a plain mutex. All
// three keep the books moonpool's actor keeps (a policy.Pool and a FIFO of
// waiting callers, served oldest first), read no clock, as moonpool's pool
// without Keep, Life or a ward does not, and answer a waiting caller on
// its own channel; so what differs from the moonpool side is only how a
// request reaches the owner and the answer comes back.

// books is a policy.Pool of size resources, made full up front, and the
// line of callers waiting for one.
type books struct {
	pool    *policy.Pool[*conn]
	waiting []chan *conn
	head    int
}

func newBooks(size int) *books {
	b := &books{pool: policy.NewPool[*conn](policy.Limits{Size: size, Idle: size}, policy.Ward{})}
	for i := range size {
		b.pool.Take(0) // Make: room reserved
		c := &conn{id: i}
		b.pool.Made(c, 0)
		b.pool.Give(c, 0)
	}
	return b
}

// take lends an idle resource, or puts reply in line and returns nil.
func (b *books) take(reply chan *conn) *conn {
	if b.head == len(b.waiting) {
		if t := b.pool.Take(0); t.Verdict == policy.Ready {
			return t.Item
		}
	}
	b.waiting = append(b.waiting, reply)
	return nil
}

// give hands c to the oldest waiting caller, or back to the pool.
func (b *books) give(c *conn) {
	if b.head < len(b.waiting) {
		w := b.waiting[b.head]
		b.waiting[b.head] = nil
		b.head++
		if b.head == len(b.waiting) {
			b.waiting, b.head = b.waiting[:0], 0
		}
		w <- c // still lent, now to w
		return
	}
	b.pool.Give(c, 0)
}

// poolReq is a request to an owner: a take with its reply channel, or a
// give.
type poolReq struct {
	reply chan *conn // nil for a give
	item  *conn
}

// replies holds reply channels, one per caller at a time; reqs holds
// requests.
var (
	replies = sync.Pool{New: func() any { return make(chan *conn, 1) }}
	reqs    = sync.Pool{New: func() any { return new(poolReq) }}
)

// quietLogger keeps protoactor's start-up line off the table.
func quietLogger(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }

// protoPool is the books owned by a stock protoactor actor, spawned with
// protoactor's default mailbox and dispatcher; callers Send and wait on a
// reply channel.
func protoPool(size int) contender {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(quietLogger))
	b := newBooks(size)
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if r, ok := c.Message().(*poolReq); ok {
			serveReq(b, r)
		}
	}))
	root := sys.Root
	return ownedPool(func(r *poolReq) { root.Send(pid, r) }, func() {
		root.Stop(pid)
		sys.Shutdown()
	})
}

// chanOwnerPool is the books owned by one goroutine that callers reach on
// a channel, answered on a reply channel each.
func chanOwnerPool(size int) contender {
	b := newBooks(size)
	in := make(chan *poolReq, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for r := range in {
			serveReq(b, r)
		}
	}()
	return ownedPool(func(r *poolReq) { in <- r }, func() {
		close(in)
		<-done
	})
}

func serveReq(b *books, r *poolReq) {
	if r.reply == nil {
		b.give(r.item)
		*r = poolReq{}
		reqs.Put(r) // a give is the owner's to recycle
		return
	}
	if c := b.take(r.reply); c != nil {
		r.reply <- c
	}
}

// ownedPool is Get+Put through send, to an owner that serves poolReqs.
func ownedPool(send func(*poolReq), stop func()) contender {
	return contender{
		run: func(n int) {
			reply := replies.Get().(chan *conn)
			for range n {
				r := reqs.Get().(*poolReq)
				*r = poolReq{reply: reply}
				send(r)
				c := <-reply // the owner is done with r once it has answered
				*r = poolReq{item: c}
				send(r) // the owner recycles it
			}
			replies.Put(reply)
		},
		close: stop,
	}
}

// mutexPool is the same books under a sync.Mutex: the reference, what
// the actor discipline itself costs. A caller that must wait does so on
// its reply channel, outside the lock.
func mutexPool(size int) contender {
	b := newBooks(size)
	var mu sync.Mutex
	var errs atomic.Int64
	return contender{
		run: func(n int) {
			reply := replies.Get().(chan *conn)
			for range n {
				mu.Lock()
				c := b.take(reply)
				mu.Unlock()
				if c == nil {
					c = <-reply
				}
				if c == nil {
					errs.Add(1)
					continue
				}
				mu.Lock()
				b.give(c)
				mu.Unlock()
			}
			replies.Put(reply)
		},
		close: func() {},
		errs:  errs.Load,
	}
}
