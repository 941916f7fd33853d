package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// seq is a numbered message from one sender, answered on a Reply.
type seq struct {
	from, n int
	reply   Reply[int]
}

func (s *seq) Refuse() { s.reply.Put(-1) }

// orderly is a Handler that checks each sender's messages arrive in the
// order sent and counts them; it is never run by two goroutines at once.
type orderly struct {
	next   []int
	inside atomic.Int32
	ran    atomic.Int64
	bad    atomic.Value
}

// Receive sees only the system path: Handle takes the user messages.
func (o *orderly) Receive(actor.Context) {}

func (o *orderly) Handle(msg any) {
	m, ok := msg.(*seq)
	if !ok {
		return
	}
	if o.inside.Add(1) != 1 {
		o.bad.Store("two goroutines ran the actor at once")
	}
	if o.next[m.from] != m.n {
		o.bad.Store(fmt.Sprintf("sender %d: got message %d, want %d", m.from, m.n, o.next[m.from]))
	}
	o.next[m.from] = m.n + 1
	o.ran.Add(1)
	o.inside.Add(-1)
	m.reply.Put(m.n)
}

// TestMailboxStress sends from many goroutines at once, some waiting for
// each answer and some sending a run of messages before collecting the
// answers, under every dispatch: every message runs exactly once, one at a
// time, in its sender's order, and every answer arrives (none is stranded
// by a holder letting go just as a sender queues).
func TestMailboxStress(t *testing.T) {
	for _, d := range []scheduling{hybrid, dedicated, stock, synchronized} {
		for _, budget := range []int{1, 16} {
			if d != hybrid && budget != 1 {
				continue
			}
			t.Run(fmt.Sprintf("%s%d", d, budget), func(t *testing.T) {
				e := New(withDispatch(d, budget))
				defer e.Shutdown(context.Background())
				const senders, each, burst = 16, 400, 8
				o := &orderly{next: make([]int, senders)}
				ref, err := e.Spawn("", o, nil)
				if err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				for g := range senders {
					wg.Go(func() {
						msgs := make([]seq, burst)
						for i := 0; i < each; i += burst {
							for k := range msgs {
								msgs[k] = seq{from: g, n: i + k}
								msgs[k].reply.Ask(ref, &msgs[k])
								if g%2 == 0 { // half the senders wait for each answer
									msgs[k].reply.Await(ref, nil)
								}
							}
							for k := range msgs {
								msgs[k].reply.Await(ref, nil)
								if got := msgs[k].reply.Take(); got != i+k {
									t.Errorf("sender %d: answer %d to message %d", g, got, i+k)
								}
							}
						}
					})
				}
				wg.Wait()
				if v := o.bad.Load(); v != nil {
					t.Fatal(v)
				}
				if got := o.ran.Load(); got != senders*each {
					t.Fatalf("ran %d messages, want %d", got, senders*each)
				}
			})
		}
	}
}

// holder keeps the *seq requests it gets until a *release arrives, then
// answers them all; *boom panics.
type holder struct {
	held     []*seq
	received atomic.Int64 // user messages that came through Receive
}

type release struct{}

// spawnHolder spawns a holder on an engine shut down when t ends.
func spawnHolder(t *testing.T) (*Ref, *holder) {
	t.Helper()
	e := New()
	t.Cleanup(func() { e.Shutdown(context.Background()) })
	h := &holder{}
	ref, err := e.Spawn("", h, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ref, h
}

func (h *holder) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *seq, *release, *boom:
		h.received.Add(1)
	}
}

func (h *holder) Handle(msg any) {
	switch m := msg.(type) {
	case *seq:
		h.held = append(h.held, m)
	case *release:
		for _, s := range h.held {
			s.reply.Put(s.n)
		}
		h.held = nil
	case *boom:
		panic("boom")
	}
}

// TestReplyAwaitDone: a caller whose done closes stops waiting, and its
// request's one answer is still collected afterwards; a Handler gets every
// user message (Receive none), and a panic in Handle resumes the same
// actor with its state.
func TestReplyAwaitDone(t *testing.T) {
	ref, h := spawnHolder(t)
	s := &seq{n: 7}
	ref.Send(s)
	done := make(chan struct{})
	close(done)
	if s.reply.Await(ref, done) {
		t.Fatal("Await reported an answer nobody gave")
	}
	ref.Send(&boom{}) // the actor keeps its held request through the panic
	ref.Send(&release{})
	if !s.reply.Await(ref, nil) {
		t.Fatal("Await with no done returned without the answer")
	}
	if got := s.reply.Take(); got != 7 {
		t.Fatalf("answer %d, want 7", got)
	}
	if n := h.received.Load(); n != 0 {
		t.Fatalf("Receive got %d user messages; Handle should have had them all", n)
	}
	// The Reply is empty again and serves the next request.
	s.n = 8
	ref.Send(s)
	ref.Send(&release{})
	s.reply.Await(ref, nil)
	if got := s.reply.Take(); got != 8 {
		t.Fatalf("second answer %d, want 8", got)
	}
}

// TestRingOrderAndWrap: the ring hands messages out in the order they were
// queued, says where each was queued, tells a published head from an empty
// one, and goes round many times without losing or repeating one.
func TestRingOrderAndWrap(t *testing.T) {
	r := newRing(4)
	if _, ok := pop(r); ok || r.ready() {
		t.Fatal("an empty ring gave a message")
	}
	next := 0
	for round := range 10 {
		for k := range 3 {
			if at := r.push(round*3 + k); at != uint64(round*3+k) {
				t.Fatalf("round %d: queued at %d, want %d", round, at, round*3+k)
			}
		}
		for range 3 {
			if !r.ready() {
				t.Fatalf("round %d: a published head not ready", round)
			}
			m, ok := pop(r)
			if !ok || m.(int) != next {
				t.Fatalf("round %d: got %v %v, want %d", round, m, ok, next)
			}
			next++
		}
	}
	// A full ring makes a sender wait until the receiver frees a cell.
	for i := range 4 {
		r.push(i)
	}
	pushed := make(chan struct{})
	go func() {
		r.push(4)
		close(pushed)
	}()
	if m, _ := pop(r); m.(int) != 0 {
		t.Fatalf("got %v, want 0", m)
	}
	<-pushed
	for want := 1; want <= 4; want++ {
		if m, ok := pop(r); !ok || m.(int) != want {
			t.Fatalf("got %v %v, want %d", m, ok, want)
		}
	}
}

// TestStarvedCallerMakesSenderYield: a parked caller that runs again more
// than starveAfter after its answer makes the mailbox starve, one that runs
// within it ends that; while the mailbox starves, an answer to a parked
// caller is noted, and the next sender that runs the actor yields once for
// it and clears the note (the yield itself only a timing could show). The
// engine's own clock is moved by nanoSkew, not waited out.
func TestStarvedCallerMakesSenderYield(t *testing.T) {
	ref, _ := spawnHolder(t)
	mb := ref.mb
	t.Cleanup(func() { nanoSkew.Store(0) })

	mb.ran(nanotime() - 2*starveAfter)
	if !mb.starving.Load() {
		t.Fatal("a caller running twice starveAfter after its answer did not make the mailbox starve")
	}

	// An answer to a parked caller while the mailbox starves is noted (the
	// Reply set up as a parked caller leaves it, with nobody to wake).
	var r Reply[int]
	r.mb, r.wake, r.state = mb, make(chan struct{}, 1), replyParked
	r.Put(1)
	<-r.wake // the wake a parked caller would have taken
	if !mb.woken.Load() {
		t.Error("an answer to a parked caller while the mailbox starved was not noted")
	}
	if r.Take() != 1 || r.mb != nil {
		t.Error("Take did not give the answer and let the mailbox go")
	}

	// The next sender that runs the actor yields, and clears the note.
	ref.Send(&release{}) // an idle actor: its sender runs it at once
	if mb.woken.Load() {
		t.Error("the sender that ran the actor left the noted wake for another")
	}

	// A caller parks, and runs again at once after its answer: the
	// mailbox no longer starves.
	done := make(chan struct{})
	go func() { r.Await(ref, nil); close(done) }()
	err := waitFor("the caller to park", func() bool { return atomic.LoadUint32(&r.state) == replyParked })
	if err != nil {
		r.Put(0) // let the caller go
		<-done
		t.Fatal(err)
	}
	nanoSkew.Add(-1e9) // before the answer: at once, however slow the machine
	r.Put(2)
	<-done
	if r.Take() != 2 {
		t.Fatal("the parked caller did not get its answer")
	}
	if mb.starving.Load() {
		t.Error("a caller that ran at once after its answer left the mailbox starving")
	}
}

// pop takes r's oldest message and moves its head past it, as the holder
// of a mailbox does once the message has run.
func pop(r *ring) (any, bool) {
	m, ok := r.pop()
	if ok {
		r.done()
	}
	return m, ok
}
