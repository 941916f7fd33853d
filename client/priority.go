package client

import (
	"context"
	"errors"
	"strings"
)

// Priority is a request's criticality. Higher is more important. Under
// overload an AdaptiveGate refuses the lowest first, and lets waiters in
// highest first. The zero Priority is PriorityNormal.
type Priority int8

// The priorities, from shed first to shed last.
const (
	PriorityLow      Priority = -1 // shed first: batch work, prefetches
	PriorityNormal   Priority = 0  // the default
	PriorityHigh     Priority = 1  // a user waits for it
	PriorityCritical Priority = 2  // shed last: health checks, payments
)

// priorityKey is the context key WithPriority stores under.
type priorityKey struct{}

// WithPriority returns a copy of ctx that carries p. A p outside
// PriorityLow to PriorityCritical is clamped to the nearer one. A nil ctx
// is read as context.Background().
func WithPriority(ctx context.Context, p Priority) context.Context {
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithValue(ctx, priorityKey{}, p.clamp())
}

// PriorityFrom is the priority ctx carries: PriorityNormal when it carries
// none, or ctx is nil.
func PriorityFrom(ctx context.Context) Priority {
	if ctx == nil {
		return PriorityNormal
	}
	if p, ok := ctx.Value(priorityKey{}).(Priority); ok {
		return p
	}
	return PriorityNormal
}

// String is the priority's name: "low", "normal", "high" or "critical".
// A value out of range reads as the one it clamps to.
func (p Priority) String() string {
	switch p.clamp() {
	case PriorityLow:
		return "low"
	case PriorityHigh:
		return "high"
	case PriorityCritical:
		return "critical"
	}
	return "normal"
}

// ParsePriority reads a name String gives, as an HTTP header or gRPC
// metadata carries it: in any case, with spaces around it or not. Any
// other text, the empty text among it, is an error, and PriorityNormal.
func ParsePriority(s string) (Priority, error) {
	v := strings.TrimSpace(s)
	for _, p := range [...]Priority{PriorityLow, PriorityNormal, PriorityHigh, PriorityCritical} {
		if strings.EqualFold(v, p.String()) {
			return p, nil
		}
	}
	return PriorityNormal, errUnknownPriority
}

// errUnknownPriority is ParsePriority's error. It names no text, so a
// server that reads every request's header allocates nothing for it.
var errUnknownPriority = errors.New("moonpool: unknown priority")

// clamp is p held within PriorityLow and PriorityCritical.
func (p Priority) clamp() Priority { return min(max(p, PriorityLow), PriorityCritical) }

// class is p's index among the classes: 0 for PriorityLow.
func (p Priority) class() int { return int(p.clamp() - PriorityLow) }
