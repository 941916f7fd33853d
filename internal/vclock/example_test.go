package vclock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/moonpool-go/moonpool/internal/vclock"
)

// An hour passes in one call, and each timer sees the clock at its own
// deadline.
func Example() {
	v := vclock.NewVirtual()
	since := func() time.Duration { return time.Duration(v.Now() - vclock.Epoch) }

	v.AfterFunc(30*time.Minute, func() { fmt.Println("keep ran out at", since()) })
	v.AfterFunc(10*time.Second, func() {
		fmt.Println("tick at", since())
		v.AfterFunc(10*time.Second, func() { fmt.Println("tick at", since()) })
	})

	v.Advance(time.Hour)
	fmt.Println("now", since(), "pending", v.Pending())
	// Output:
	// tick at 10s
	// tick at 20s
	// keep ran out at 30m0s
	// now 1h0m0s pending 0
}

// A test waits for the code under test, here a Sleep on another goroutine,
// to register its timer before moving time; otherwise the Advance could come
// first and the sleeper would never wake.
func ExampleVirtual_WaitPending() {
	v := vclock.NewVirtual()
	ctx := context.Background()

	woke := make(chan error)
	go func() { woke <- vclock.Sleep(ctx, v, time.Minute) }()

	if err := v.WaitPending(ctx, 1); err != nil {
		fmt.Println(err)
		return
	}
	d, _ := v.AdvanceNext()
	fmt.Println("moved", d, "woke with", <-woke)
	// Output:
	// moved 1m0s woke with <nil>
}

// A clock whose timers fire late, as a busy machine's do: a wake-up stamped
// with the clock's reading sees the lateness; one stamped with the instant it
// was due would not.
func ExampleWithLateness() {
	v := vclock.NewVirtual(vclock.WithLateness(2 * time.Millisecond))
	start := v.Now()
	due := start + int64(10*time.Millisecond)
	v.AfterFunc(10*time.Millisecond, func() {
		fmt.Println("due at", time.Duration(due-start), "woke at", time.Duration(v.Now()-start))
	})
	v.AdvanceNext()
	// Output:
	// due at 10ms woke at 12ms
}
