package moongrpc

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// most is how many hedges h lets one call send: Max, at least 1.
func most(h *client.Hedge) int { return max(h.Max, 1) }

// sideEffects caches NoSideEffects by method name.
var sideEffects sync.Map // string → bool

// NoSideEffects reports whether method, a full method name such as
// "/pkg.Service/Method", is declared in its .proto with
//
//	option idempotency_level = NO_SIDE_EFFECTS;
//
// as the global protobuf registry has it. Such a method is the gRPC kin of
// an HTTP GET: a copy of the call changes nothing, so it is safe to hedge.
// A method the registry does not know, or that is only IDEMPOTENT, reports
// false: a hedge copies every slow call on purpose, and two copies of a
// write at once can land after another client's write and undo it.
func NoSideEffects(method string) bool {
	if v, ok := sideEffects.Load(method); ok {
		return v.(bool)
	}
	safe := false
	name := strings.TrimPrefix(method, "/")
	if i := strings.LastIndexByte(name, '/'); i > 0 {
		name = name[:i] + "." + name[i+1:]
		if d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name)); err == nil {
			if md, ok := d.(protoreflect.MethodDescriptor); ok {
				opts, _ := md.Options().(*descriptorpb.MethodOptions)
				safe = opts.GetIdempotencyLevel() == descriptorpb.MethodOptions_NO_SIDE_EFFECTS
			}
		}
	}
	sideEffects.Store(method, safe)
	return safe
}

// hedgeDelay is how long the current attempt waits before a hedge, and
// false if it sends none: the call may not be hedged, its hedges are
// spent, or nothing says how long.
func (c *call) hedgeDelay() (time.Duration, bool) {
	if c.hedge == nil || c.hedges >= most(c.hedge) {
		return 0, false
	}
	return c.hedge.DelayFrom(c.cfg.Budget)
}

// race makes the attempt on a ctx of its own, and a hedge each delay
// while no answer has come, as long as the call has hedges left and the
// budget allows. The first answer wins, and race returns it as attempt
// would. If every attempt out fails, race returns the last failure.
func (c *call) race(ctx context.Context, delay time.Duration) error {
	first := !c.made // the call's first attempt, whose latency counts
	c.made = true
	clock := c.cfg.Engine.Clock()
	rc := &race{c: *c, out: make(chan *entrant, 1+most(c.hedge)-c.hedges)}
	start := clock.Now()
	rc.run(ctx)
	due := make(chan struct{}, 1)
	ring := func() {
		select {
		case due <- struct{}{}:
		default:
		}
	}
	timer := clock.AfterFunc(delay, ring)
	defer func() { timer.Stop() }()
	out := 1          // entrants still running
	firstOut := true  // entrant 0 is among them
	var last *entrant // the latest failure
	for {
		select {
		case <-due:
			if !c.cfg.Budget.Hedge() {
				continue // refused: this call sends no more hedges
			}
			c.hedges++
			rc.run(ctx)
			out++
			if c.hedges < most(c.hedge) {
				timer = clock.AfterFunc(delay, ring)
			}
		case e := <-rc.out:
			out--
			if e.i == 0 {
				firstOut = false
			}
			judged, answer := c.judge(e.err, e.trailer)
			if answer {
				rc.end()
				if first && e.i == 0 {
					c.cfg.Budget.Observe(e.took)
				} else if first && firstOut {
					// The first attempt lost: its latency is at least
					// this long. Leaving it out would make the quantile
					// ever shorter and the hedges ever more.
					c.cfg.Budget.Observe(time.Duration(clock.Now() - start))
				}
				c.take(e)
				return judged
			}
			c.last = e.err
			last = e
			if out == 0 {
				rc.end()
				c.take(last)
				return judged
			}
		case <-ctx.Done():
			rc.end()
			c.last = status.FromContextError(ctx.Err()).Err()
			return client.Permanent(c.last)
		}
	}
}

// take gives the caller what e came back with: its reply, if it has
// one, and the header, trailer and peer the caller's options ask for.
func (c *call) take(e *entrant) {
	if e.err == nil {
		reply := c.reply.(proto.Message)
		proto.Reset(reply)
		proto.Merge(reply, e.reply)
	}
	for _, o := range c.opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = e.header
		case grpc.TrailerCallOption:
			*o.TrailerAddr = e.trailer
		case grpc.PeerCallOption:
			*o.PeerAddr = e.peer
		}
	}
}

// race is the state of one attempt's race between the call and its
// hedges.
type race struct {
	c   call          // a copy, read only: the call stays on its caller's stack
	out chan *entrant // room for every entrant, so none ever blocks

	mu      sync.Mutex
	over    bool                 // a winner is chosen or the race given up
	cancels []context.CancelFunc // each entrant's, by index
}

// entrant is one attempt of a race: what it was sent with and what it
// came back with.
type entrant struct {
	i       int           // its index: 0 for the attempt, then each hedge
	reply   proto.Message // its own, so attempts never share one
	err     error         // what the invoker returned
	header  metadata.MD
	trailer metadata.MD
	peer    peer.Peer
	took    time.Duration // from sending to the answer
}

// run makes one more attempt of the call on a goroutine of its own, on a
// ctx the race can cancel, and hands what comes back to the race.
func (rc *race) run(ctx context.Context) {
	c := &rc.c
	ctx, cancel := context.WithCancel(ctx)
	rc.mu.Lock()
	e := &entrant{i: len(rc.cancels), reply: c.reply.(proto.Message).ProtoReflect().New().Interface()}
	rc.cancels = append(rc.cancels, cancel)
	rc.mu.Unlock()
	// The caller's header, trailer and peer options would be written by
	// every attempt at once: each gets its own, and take copies the
	// winner's.
	opts := make([]grpc.CallOption, 0, len(c.opts)+3)
	for _, o := range c.opts {
		switch o.(type) {
		case grpc.HeaderCallOption, grpc.TrailerCallOption, grpc.PeerCallOption:
		default:
			opts = append(opts, o)
		}
	}
	opts = append(opts, grpc.Header(&e.header), grpc.Trailer(&e.trailer), grpc.Peer(&e.peer))
	go func() {
		clock := c.cfg.Engine.Clock()
		start := clock.Now()
		e.err = c.invoker(ctx, c.method, c.req, e.reply, c.cc, opts...)
		e.took = time.Duration(clock.Now() - start)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if !rc.over {
			rc.out <- e
		}
	}()
}

// end closes the race and cancels every entrant: the losers, and the
// winner, whose call is done.
func (rc *race) end() {
	rc.mu.Lock()
	rc.over = true
	rc.mu.Unlock()
	for _, cancel := range rc.cancels {
		cancel()
	}
}
