package policy

// Shedder stops lending while the process is hot.
type Shedder struct{}
