package policy

import (
	"fmt"
	"testing"
)

// step is one row of a table test on a subject of type S: a call at a
// fixed instant and the check of what it answers. Each kind of call is a
// type of its own (bucketTake, windowLeft, poolGive, ...), holding the
// answer that call gives, so a row cannot want the wrong kind of answer.
// where names the row in a failure ("10/s burst 2: step 3").
type step[S any] interface {
	run(t *testing.T, s S, where string)
}

// play runs a table's steps against s in order: the story the table tells.
func play[S any](t *testing.T, name string, s S, steps []step[S]) {
	t.Helper()
	for i, st := range steps {
		st.run(t, s, fmt.Sprintf("%s: step %d", name, i))
	}
}
