package policy

// Release frees the room a Make reserved without anything being tried: the
// caller that was told Make gave up (its context ended) before opening. The
// ward hears nothing, because the backend was never asked; Unmade is for a
// make that failed. Release with nothing reserved changes nothing.
func (p *Pool[T]) Release() {
	if p.reserved > 0 {
		p.reserved--
	}
}
