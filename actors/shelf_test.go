package actors

import "testing"

// TestShelfKeepsEntries: entries pushed across several chunks keep their
// values as the shelf grows, and chunks after the first never move, so
// growing copies at most the first chunk.
func TestShelfKeepsEntries(t *testing.T) {
	var s shelf[int64]
	const n = 3*shelfChunk + 17
	var second *int64
	for i := range int32(n) {
		if j := s.push(); j != i {
			t.Fatalf("push %d returned index %d", i, j)
		}
		*s.at(i) = int64(i) * 7
		if i == shelfChunk {
			second = s.at(i)
		}
	}
	if s.len() != n {
		t.Fatalf("len %d after %d pushes", s.len(), n)
	}
	for i := range int32(n) {
		if got := *s.at(i); got != int64(i)*7 {
			t.Fatalf("entry %d = %d, want %d", i, got, int64(i)*7)
		}
	}
	if second != s.at(shelfChunk) {
		t.Fatal("an entry of the second chunk moved as the shelf grew")
	}
	if c := cap(s.chunks[1]); c != shelfChunk {
		t.Fatalf("a later chunk has room for %d, want %d", c, shelfChunk)
	}
}
