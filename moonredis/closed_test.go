package moonredis

import (
	"context"
	"testing"
	"time"

	"github.com/moonpool-go/moonpool/client"
)

// TestTryClosed: a closed limiter's Try, and one whose engine shut down
// under it, is a refusal that never ends and says Closed. A server tells
// it from a quota's refusal by that: 503, not 429.
func TestTryClosed(t *testing.T) {
	f := newFake(t)
	b, err := NewBucket(f.eng, f.cfg(), 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWindow(f.eng, f.cfg(), 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	aw, err := NewApproxWindow(f.eng, f.cfg(), 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d := b.Try("k"); !d.OK || d.Closed {
		t.Fatalf("open bucket: %+v, want allowed", d)
	}
	for _, l := range []interface{ Close(context.Context) error }{b, w, aw} {
		if err := l.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	closed := client.Decision{Wait: client.Never, Closed: true}
	for _, c := range []struct {
		name string
		try  func() client.Decision
	}{
		{"Bucket.Try", func() client.Decision { return b.Try("k") }},
		{"Bucket.TryN", func() client.Decision { return b.TryN("k", 5) }},
		{"Window.Try", func() client.Decision { return w.Try("k") }},
		{"ApproxWindow.Try", func() client.Decision { return aw.Try("k") }},
	} {
		if d := c.try(); d != closed {
			t.Errorf("%s after Close: %+v, want %+v", c.name, d, closed)
		}
	}

	g := newFake(t)
	orphan, err := NewBucket(g.eng, g.cfg(), 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.eng.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := orphan.Try("k"); d != closed {
		t.Errorf("Try on a shut engine: %+v, want %+v", d, closed)
	}
}
