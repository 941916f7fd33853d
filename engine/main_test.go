package engine

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor waits until cond holds, and returns nil; or until ten seconds
// pass first, and returns an error naming what was awaited. Any goroutine
// may call it: the test's own fails with the error, another reports it.
func waitFor(what string, cond func() bool) error {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up waiting for %s", what)
		}
		runtime.Gosched()
	}
	return nil
}
