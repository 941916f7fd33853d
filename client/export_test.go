package client

// HotDrawn is how many of k's Allows were drawn from its hot keys' lent
// tokens rather than asked of its actors: for tests that must know the
// credit was used.
func HotDrawn(k *KeyedBucket) int64 { return k.drawn() }
