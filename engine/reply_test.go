package engine

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestReplyCancelRacingAnswer: a parked caller whose done closes just as
// the actor answers gets the one answer, whichever comes first, and the
// Reply is left clean. Its wake channel holds no token afterwards, so the
// next request on the Reply is not woken before its own answer. Under
// -race the rounds where done wins also check that the caller never takes
// the answer while Put is still using the Reply.
func TestReplyCancelRacingAnswer(t *testing.T) {
	ref, _ := spawnHolder(t)
	const rounds = 3000
	var s seq
	var withdrawn int // rounds where done won before the answer came
	for i := range rounds {
		s.n = i
		s.reply.Ask(ref, &s)
		done := make(chan struct{})
		answered := make(chan struct{})
		var left atomic.Bool // the caller's first Await has returned
		go func() {
			err := waitFor("the caller to park", func() bool {
				return atomic.LoadUint32(&s.reply.state) == replyParked
			})
			if err != nil {
				t.Errorf("round %d: %v", i, err) // and answer it all the same
			}
			switch i % 3 {
			case 0: // done first, the answer at once after
				close(done)
				ref.Send(&release{})
			case 1: // the answer first, done at once after
				ref.Send(&release{})
				close(done)
			case 2: // done, and the answer only once the caller has left
				close(done)
				if err := waitFor("the caller to leave", left.Load); err != nil {
					t.Errorf("round %d: %v", i, err)
				}
				ref.Send(&release{})
			}
			// A round trip behind the release: once it is answered, the
			// actor has finished the Put that answered s.
			var sync seq
			sync.reply.Ask(ref, &sync)
			ref.Send(&release{})
			sync.reply.Await(ref, nil)
			sync.reply.Take()
			close(answered)
		}()
		ok := s.reply.Await(ref, done)
		left.Store(true)
		if !ok {
			withdrawn++
			late := make(chan struct{})
			timer := time.AfterFunc(10*time.Second, func() { close(late) })
			if !s.reply.Await(ref, late) {
				t.Fatalf("round %d: the withdrawn request was never answered", i)
			}
			timer.Stop()
		}
		if got := s.reply.Take(); got != i {
			t.Fatalf("round %d: answer %d", i, got)
		}
		select {
		case <-answered:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the actor never finished its Put", i)
		}
		if n := len(s.reply.wake); n != 0 {
			t.Fatalf("round %d: %d wake left over after the answer was taken", i, n)
		}
	}
	t.Logf("done won before the answer in %d of %d rounds", withdrawn, rounds)

	// The next request on the Reply waits for its own answer.
	s.n = -7
	s.reply.Ask(ref, &s)
	got := make(chan int, 1)
	go func() {
		s.reply.Await(ref, nil)
		got <- s.reply.Take()
	}()
	err := waitFor("the last caller to park", func() bool {
		return atomic.LoadUint32(&s.reply.state) == replyParked
	})
	if err != nil {
		t.Fatal(err)
	}
	ref.Send(&release{})
	select {
	case v := <-got:
		if v != -7 {
			t.Fatalf("the next request got %d, want its own answer -7", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the next request was never answered")
	}
}
