package policy

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkBucketTake is the passing path: each call a nanosecond later,
// earning and spending.
func BenchmarkBucketTake(b *testing.B) {
	bucket := NewBucket(1e9, 1e9, 0)
	var now int64
	for b.Loop() {
		now++
		bucket.Take(now, 1)
	}
}

// BenchmarkBucketTakeRefused is the path a limiter under attack runs.
func BenchmarkBucketTakeRefused(b *testing.B) {
	bucket := NewBucket(1, 1, 0)
	bucket.Take(0, 1)
	var now int64
	for b.Loop() {
		now++
		bucket.Take(now, 1)
	}
}

func BenchmarkBucketNext(b *testing.B) {
	bucket := NewBucket(3, 1, 0)
	bucket.Take(0, 1)
	var now int64
	for b.Loop() {
		now++
		bucket.Next(now, 1)
	}
}

// BenchmarkWindowTake runs a full window in its steady state: each call
// comes as the oldest stamp falls out, so each counts one and drops one.
// The quota's size must not change the cost.
func BenchmarkWindowTake(b *testing.B) {
	for _, allow := range []int{10, 1000, 1_000_000} {
		b.Run(fmt.Sprintf("allow=%d", allow), func(b *testing.B) {
			step := int64(time.Microsecond)
			window := NewWindow(allow, time.Duration(int64(allow)*step))
			var now int64
			for range 2 * allow {
				now += step
				window.Take(now)
			}
			for b.Loop() {
				now += step
				if !window.Take(now) {
					b.Fatal("refused in the steady state")
				}
			}
		})
	}
}

// BenchmarkWindowTakeRefused is a full window asked again at once.
func BenchmarkWindowTakeRefused(b *testing.B) {
	for _, allow := range []int{10, 1_000_000} {
		b.Run(fmt.Sprintf("allow=%d", allow), func(b *testing.B) {
			window := NewWindow(allow, time.Hour)
			for range allow {
				window.Take(0)
			}
			var now int64
			for b.Loop() {
				now++
				window.Take(now)
			}
		})
	}
}

func BenchmarkWindowLeft(b *testing.B) {
	window := NewWindow(1000, time.Millisecond)
	var now int64
	for range 1000 {
		now += int64(time.Microsecond)
		window.Take(now)
	}
	for b.Loop() {
		window.Left(now)
	}
}

func BenchmarkGate(b *testing.B) {
	gate := NewGate(64)
	for b.Loop() {
		gate.Enter()
		gate.Leave()
	}
}
