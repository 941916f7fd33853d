package policy

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind. policy/
// starts none, so any that shows up is a bug in a test or a regression.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
