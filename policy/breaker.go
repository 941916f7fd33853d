package policy

// Breaker refuses makes at the rate a failing backend deserves.
type Breaker struct{}
