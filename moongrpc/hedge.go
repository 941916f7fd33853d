package moongrpc

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/moonpool-go/moonpool/client"
	"github.com/moonpool-go/moonpool/internal/hedge"
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
// the lead its alarms are set early by; false if it sends none: the call
// may not be hedged, its hedges are spent, or nothing says how long.
func (c *call) hedgeDelay() (time.Duration, *hedge.Lead, bool) {
	if c.hedge == nil || c.hedges >= most(c.hedge) {
		return 0, nil, false
	}
	return c.lead.Delay(c.hedge, c.cfg.Budget)
}

// race makes the attempt on a ctx of its own, and a hedge each delay
// while no answer has come, as long as the call has hedges left and the
// budget allows. The first answer wins, and race returns it as attempt
// would. If every attempt out fails, race returns the last failure.
func (c *call) race(ctx context.Context, delay time.Duration, lead *hedge.Lead) error {
	first := !c.made // the call's first attempt, whose latency counts
	c.made = true
	rc := &hedge.Race[*entrant]{
		Clock:  c.cfg.Engine.Clock(),
		Budget: c.cfg.Budget,
		Delay:  delay,
		Left:   most(c.hedge) - c.hedges,
		First:  first,
		Lead:   lead,
	}
	cc := *c // a copy, read only: the call stays on its caller's stack
	rc.Ready = func(ctx context.Context) (hedge.Send[*entrant], func(), bool) {
		return cc.send(ctx), nil, true
	}
	actx, cancel := context.WithCancel(ctx)
	e, err := rc.Run(ctx, cancel, cc.send(actx))
	c.hedges += rc.Sent
	if err != nil {
		c.last = status.FromContextError(err).Err()
		return client.Permanent(c.last)
	}
	e.Cancel() // the call is done
	if e.Val.err != nil {
		c.last = e.Val.err
	}
	c.take(e.Val)
	return e.Err
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

// entrant is one attempt of a race: what it was sent with and what it
// came back with.
type entrant struct {
	reply   proto.Message // its own, so attempts never share one
	err     error         // what the invoker returned
	header  metadata.MD
	trailer metadata.MD
	peer    peer.Peer
}

// send readies one more attempt of the call on ctx, for a race. It
// returns what makes the attempt and judges what comes back.
func (c *call) send(ctx context.Context) hedge.Send[*entrant] {
	e := &entrant{reply: c.reply.(proto.Message).ProtoReflect().New().Interface()}
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
	return func() hedge.Result[*entrant] {
		e.err = c.invoker(ctx, c.method, c.req, e.reply, c.cc, opts...)
		judged, answer := c.judge(e.err, e.trailer)
		return hedge.Result[*entrant]{Val: e, Err: judged, Answer: answer}
	}
}
