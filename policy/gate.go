package policy

import "math"

// Gate is a count with a ceiling: the concurrency limit a server puts on
// itself.
//
// Unlike a rate, it has nothing to do with time; it is how many things are
// happening at once. A server past its limit answers rather than queues,
// which is what keeps a queue from becoming the outage.
//
// The zero Gate has no limit: it counts, and never refuses.
type Gate struct {
	limit int // most inside at once; <= 0 is no limit
	held  int // inside now; never below zero
}

// NewGate is a gate that nothing has entered, letting at most limit in at
// once. A limit <= 0 is no limit, as a zero Limits field is for the pool.
func NewGate(limit int) *Gate {
	return &Gate{limit: limit}
}

// Enter is whether there is room, taking it if there is. A refused Enter
// changes nothing. Even with no limit the count stops at the largest int
// rather than wrapping round to negative.
func (g *Gate) Enter() bool {
	if g.held == math.MaxInt || (g.limit > 0 && g.held >= g.limit) {
		return false
	}
	g.held++
	return true
}

// Leave gives room back. A Leave with nobody inside changes nothing: one
// unmatched Leave must not let an extra caller in later.
func (g *Gate) Leave() {
	if g.held > 0 {
		g.held--
	}
}

// Held is how many are inside.
func (g *Gate) Held() int {
	return g.held
}
