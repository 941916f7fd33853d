package policy_test

import (
	"fmt"
	"time"

	"github.com/moonpool-go/moonpool/policy"
)

// A retry loop: the policy says whether and how long, the caller sleeps and
// draws its own random numbers. Here the draws are fixed, so the run is
// the same every time.
func ExampleBackoff() {
	backoff := policy.DefaultBackoff
	backoff.Attempts = 5
	draws := []float64{0.5, 0.9, 0.1, 0.75} // from the caller's own source
	for tries := 1; ; tries++ {
		// ... attempt number tries fails ...
		if !backoff.More(tries) {
			fmt.Println("giving up after", tries, "attempts")
			break
		}
		fmt.Println("retry", tries, "after", backoff.Delay(tries, draws[tries-1], 0))
	}
	// Output:
	// retry 1 after 50ms
	// retry 2 after 180ms
	// retry 3 after 40ms
	// retry 4 after 600ms
	// giving up after 5 attempts
}

// Ceiling is what a client without jitter sleeps, and what every jitter
// draws within.
func ExampleBackoff_Ceiling() {
	for retry := 1; retry <= 5; retry++ {
		fmt.Print(policy.DefaultBackoff.Ceiling(retry), " ")
	}
	fmt.Println()
	// Output: 100ms 200ms 400ms 800ms 1s
}

// Schedule lays out a whole plan, for a test or a log line. Decorrelated
// grows from where each delay landed.
func ExampleBackoff_Schedule() {
	backoff := policy.Backoff{Base: 100 * time.Millisecond, Factor: 2, Cap: time.Second, Attempts: 5, Jitter: policy.Decorrelated}
	fmt.Println(backoff.Schedule([]float64{0.5, 0.5, 0.5, 0.5}))
	// Output: [200ms 350ms 550ms 550ms]
}

// A hundred a second, two hundred at once: a quiet client gets its burst,
// then the rate.
func ExampleBucket() {
	start := int64(0) // the caller's clock, in nanoseconds
	bucket := policy.NewBucket(100, 200, start)
	passed := 0
	for bucket.Take(start, 1) {
		passed++
	}
	fmt.Println("passed at once:", passed)
	fmt.Println("next one in:", bucket.Next(start, 1))
	fmt.Println("tokens a second later:", bucket.Tokens(start+int64(time.Second)))
	// Output:
	// passed at once: 200
	// next one in: 10ms
	// tokens a second later: 100
}

// A thousand a day is a quota, not a rate: all thousand may come at once,
// and then none until the first of them is a day old.
func ExampleWindow() {
	day := 24 * time.Hour
	morning := int64(9 * time.Hour)
	quota := policy.NewWindow(1000, day)
	for range 1000 {
		quota.Take(morning)
	}
	fmt.Println("one more this morning:", quota.Take(morning))
	fmt.Println("left by evening:", quota.Left(morning+int64(10*time.Hour)))
	fmt.Println("room again in:", quota.Next(morning+int64(10*time.Hour)))
	fmt.Println("next morning:", quota.Take(morning+int64(day)))
	// Output:
	// one more this morning: false
	// left by evening: 0
	// room again in: 14h0m0s
	// next morning: true
}

// Sixty-four at once; the sixty-fifth is answered, not queued.
func ExampleGate() {
	gate := policy.NewGate(64)
	for range 64 {
		gate.Enter()
	}
	fmt.Println("65th gets in:", gate.Enter())
	gate.Leave() // one finishes
	fmt.Println("after one leaves:", gate.Enter(), gate.Held())
	// Output:
	// 65th gets in: false
	// after one leaves: true 64
}
