package actors

// shelf is a growable array in chunks of shelfChunk: growing never copies
// more than the first chunk, so a keyed limiter adding its millionth key
// pays what it paid for its first, where a slice would copy a million
// entries on the call that doubles it, and the collector scans chunks of
// bounded size. The first chunk grows as a slice does, so a limiter of a
// few keys holds a few entries, not a chunk; its entries move as it grows,
// so a pointer from at is good only until the next push.
//
// The zero shelf is empty and ready.
type shelf[T any] struct {
	chunks [][]T
	n      int32
}

const (
	shelfBits  = 10
	shelfChunk = 1 << shelfBits
)

// at is entry i, which must be below len.
func (s *shelf[T]) at(i int32) *T { return &s.chunks[i>>shelfBits][i&(shelfChunk-1)] }

func (s *shelf[T]) len() int32 { return s.n }

// push adds a zero entry and returns its index.
func (s *shelf[T]) push() int32 {
	c := int(s.n >> shelfBits)
	if c == len(s.chunks) {
		size := shelfChunk
		if c == 0 {
			size = 0 // the first chunk grows by appending
		}
		s.chunks = append(s.chunks, make([]T, 0, size))
	}
	var zero T
	s.chunks[c] = append(s.chunks[c], zero)
	s.n++
	return s.n - 1
}
