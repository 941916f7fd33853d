package actors

import "hash/maphash"

// keyIndex finds a keyed actor's entries by name. It maps each name's hash
// to the first entry of that hash; the others of the same hash (about
// one pair among 2^32 names) follow it through their entries' same field.
//
// Keyed by a number rather than the name, the map holds no pointers, so
// the collector never scans it, and a call hashes its key once where a map
// of names hashes it for the look-up and again for the insert that makes
// the key.
type keyIndex struct {
	seed  maphash.Seed
	heads map[uint64]int32
	n     int    // names held
	blunt uint64 // hash bits left out: none but in tests, which make names share hashes
}

func (x *keyIndex) init(seed maphash.Seed, size int) {
	x.seed, x.heads, x.n = seed, make(map[uint64]int32, size), 0
}

func (x *keyIndex) hash(name string) uint64 { return maphash.String(x.seed, name) &^ x.blunt }

// find is the entry named name, whose hash is h, if k holds one.
func (k *keyed[S, R]) find(name string, h uint64) (int32, bool) {
	i, ok := k.index.heads[h]
	for ok && k.keys.at(i).name != name {
		i = k.keys.at(i).same
		ok = i >= 0
	}
	return i, ok
}

// note indexes entry i, named a name of hash h that k does not hold yet.
func (k *keyed[S, R]) note(i int32, h uint64) {
	j, ok := k.index.heads[h]
	if !ok {
		j = -1
	}
	k.keys.at(i).same = j
	k.index.heads[h] = i
	k.index.n++
}

// unnote takes entry i out of the index.
func (k *keyed[S, R]) unnote(i int32) {
	e := k.keys.at(i)
	h := k.index.hash(e.name)
	j := k.index.heads[h]
	if j == i {
		if e.same >= 0 {
			k.index.heads[h] = e.same
		} else {
			delete(k.index.heads, h)
		}
	} else {
		for k.keys.at(j).same != i {
			j = k.keys.at(j).same
		}
		k.keys.at(j).same = e.same
	}
	k.index.n--
}
