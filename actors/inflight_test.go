package actors

import (
	"errors"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/engine"
	"github.com/moonpool-go/moonpool/policy"
)

// arm has the actor behind ref panic once: as it takes in the next request
// that wants an answer, or with after once it has answered it.
func arm(ref *engine.Ref, after bool) {
	f := &fault{after: after, armed: make(chan struct{})}
	ref.Send(f)
	<-f.armed
}

// asked is one request sent: wait blocks for its first answer and returns
// its error; extra counts answers after that one.
type asked struct {
	wait  func() error
	extra func() int
}

func askAllow(ref *engine.Ref, now int64, key string) asked {
	m := &Allow{Now: now, Key: key, N: 1, Reply: make(chan Permit, 2)}
	ref.Send(m)
	return asked{func() error { return (<-m.Reply).Err }, func() int { return len(m.Reply) }}
}

func askEnter(ref *engine.Ref) asked {
	m := &Enter{Reply: make(chan Permit, 2)}
	ref.Send(m)
	return asked{
		func() error {
			p := <-m.Reply
			if p.OK {
				ref.Send(&Leave{})
			}
			return p.Err
		},
		func() int { return len(m.Reply) },
	}
}

func askTake(ref *engine.Ref, now int64) asked {
	m := &Take[int64]{Now: now, Reply: make(chan Answer[int64], 2)}
	ref.Send(m)
	return asked{
		func() error {
			a := <-m.Reply
			if a.Verdict == policy.Make {
				ref.Send(&Release{Now: now}) // the room back: nothing is made
			}
			return a.Err
		},
		func() int { return len(m.Reply) },
	}
}

// TestPanicAnswersOnceEveryActor: whichever actor a request reaches, a
// panic while it is handled gives it exactly one answer: ErrStopped if the
// panic came before its answer, its own answer if after; and the actor
// goes on serving. Before, only the pool kept this promise: a limiter, a
// keyed limiter or a gate left the caller of the panicking request waiting
// for ever.
func TestPanicAnswersOnceEveryActor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spawn func(e *engine.Engine) (*engine.Ref, error)
		ask   func(ref *engine.Ref, now int64) asked
	}{
		{"pool", func(e *engine.Engine) (*engine.Ref, error) {
			return SpawnPool[int64](e, "", PoolConfig{Limits: policy.Limits{Size: 4}}, nil)
		}, askTake},
		{"bucket", func(e *engine.Engine) (*engine.Ref, error) { return SpawnBucket(e, "", 1000, 100) },
			func(ref *engine.Ref, now int64) asked { return askAllow(ref, now, "") }},
		{"window", func(e *engine.Engine) (*engine.Ref, error) { return SpawnWindow(e, "", 100, time.Second) },
			func(ref *engine.Ref, now int64) asked { return askAllow(ref, now, "") }},
		{"bucket with credit", func(e *engine.Engine) (*engine.Ref, error) {
			ref, _, err := SpawnBucketCredit(e, "", 1000, 100)
			return ref, err
		}, func(ref *engine.Ref, now int64) asked { return askAllow(ref, now, "") }},
		{"keyed bucket", func(e *engine.Engine) (*engine.Ref, error) { return SpawnKeyedBucket(e, "", 1000, 100) },
			func(ref *engine.Ref, now int64) asked { return askAllow(ref, now, "k") }},
		{"keyed window", func(e *engine.Engine) (*engine.Ref, error) { return SpawnKeyedWindow(e, "", 100, time.Second) },
			func(ref *engine.Ref, now int64) asked { return askAllow(ref, now, "k") }},
		{"gate", func(e *engine.Engine) (*engine.Ref, error) { return SpawnGate(e, "", 100) },
			func(ref *engine.Ref, _ int64) asked { return askEnter(ref) }},
		{"gate with credit", func(e *engine.Engine) (*engine.Ref, error) {
			ref, _, err := SpawnGateCredit(e, "", 100)
			return ref, err
		}, func(ref *engine.Ref, _ int64) asked { return askEnter(ref) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newHarness(t)
			ref, err := tc.spawn(r.e)
			if err != nil {
				t.Fatal(err)
			}
			for _, after := range []bool{false, true} {
				arm(ref, after)
				hit := tc.ask(ref, r.at(0))
				err := hit.wait()
				if want := !after; errors.Is(err, ErrStopped) != want {
					t.Fatalf("panic after the answer %v: the request in flight was answered %v", after, err)
				}
				if err := tc.ask(ref, r.at(0)).wait(); err != nil {
					t.Fatalf("panic after the answer %v: the next request got %v, want served", after, err)
				}
				// The next one's answer means the panicking one is done with.
				if n := hit.extra(); n != 0 {
					t.Fatalf("panic after the answer %v: the request in flight got %d more answers", after, n)
				}
			}
		})
	}
}

// TestPanicLeavesParkedWaiting: a panic while one request is handled
// leaves a caller parked before it in line, answered once when its turn
// comes.
func TestPanicLeavesParkedWaiting(t *testing.T) {
	r := newHarness(t)
	ref, err := SpawnBucket(r.e, "", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p := ask(ref, "", r.at(0), 1); !p.OK {
		t.Fatalf("first token: %+v", p)
	}
	parked := park(ref, "", r.at(0), 1, 0)
	arm(ref, false)
	if p := ask(ref, "", r.at(0), 1); !errors.Is(p.Err, ErrStopped) {
		t.Fatalf("the panicking Allow got %+v, want ErrStopped", p)
	}
	unanswered(t, "across the panic", parked)
	r.advance(ref, time.Second)
	if p := answer(parked); !p.OK {
		t.Fatalf("the parked caller got %+v, want its token", p)
	}
	left(ref, "", r.at(time.Second))
	unanswered(t, "after its answer", parked)
}
