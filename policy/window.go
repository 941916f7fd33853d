package policy

import "time"

// Window is a sliding-window quota.
type Window struct{}

// NewWindow returns an empty window.
func NewWindow(allow int, window time.Duration) *Window { return &Window{} }

// Take counts an event.
func (w *Window) Take(now int64) bool { return false }

// Left is how many remain.
func (w *Window) Left(now int64) int { return 0 }

// Next is when there will be room.
func (w *Window) Next(now int64) time.Duration { return 0 }
