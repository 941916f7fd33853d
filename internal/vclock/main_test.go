package vclock_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: Sleep
// and the real clock's timers promise not to.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
