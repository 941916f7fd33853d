package policy

import (
	"math"
	"slices"
)

// Stamps says which of a pool's calls need a fresh time to answer right,
// for an owner that would rather not read a clock it does not need (a
// reading costs as much as a Take). take is whether Take's verdict may
// depend on the time: only through the ward, since a pool that checks
// staleness against the latest time it was given (an earlier call's)
// still retires on time as long as its owner calls Evict at Deadline with
// a fresh one. give is whether Give's may: through Keep and Life (a
// returned resource's idle time starts at its return), or through the
// ward. A call that needs no fresh time may be given any time no later
// than the latest: the pool reads a clock that goes back as standing still.
func Stamps(limits Limits, ward Ward) (take, give bool) {
	limits = limits.clamp()
	take = ward.Breaker.On() || ward.Bucket.On() || ward.Backoff.Base > 0 || ward.Shedder.On()
	give = take || limits.Keep != Forever || limits.Life != Forever
	return take, give
}

// GiveLent is Give for an owner that refuses a resource it has not lent:
// if item is not lent out to a caller now (never lent, given back already,
// or lent by Due to be checked), nothing changes and lent is false;
// otherwise it is Give. It looks item up once,
// where Lent and then Give look it up twice, which on a pool's hot path
// is a tenth of the cost.
func (p *Pool[T]) GiveLent(item T, now int64) (kept, lent bool) {
	now = p.clock(now)
	i, ok := p.lentTo(item)
	if !ok {
		return false, false
	}
	return p.giveBack(i, now), true
}

// GiveUnchecked is GiveLent for a resource that comes back neither used nor
// checked: its holder's check of it was cut short by the holder, which says
// nothing of the resource. It keeps the time the resource was last known
// good (see Sat), where a Give would make it now, so the next owner that
// asks Sat still checks it before lending it.
func (p *Pool[T]) GiveUnchecked(item T, now int64) (kept, lent bool) {
	now = p.clock(now)
	i, ok := p.lentTo(item)
	if !ok {
		return false, false
	}
	seen := p.recs[i].seen
	if kept = p.giveBack(i, now); kept {
		p.recs[i].seen = seen
	}
	return kept, true
}

// Dies is when item's Life ends: math.MaxInt64 for never, or for a
// resource not on the books.
func (p *Pool[T]) Dies(item T) int64 {
	i, ok := p.books[item]
	if !ok || p.limits.Life == Forever {
		return math.MaxInt64
	}
	e := &p.recs[i]
	return after(e.birth, p.life(e))
}

// GiveLentSince is GiveLent for a resource that came home at since, before
// now, and sat idle on its owner's rack from then: its idle time, which
// Keep measures, counts from since (no earlier than when it was lent, no
// later than now), and it takes its place among the idle by that time, so
// they stay in the order they came home.
func (p *Pool[T]) GiveLentSince(item T, since, now int64) (kept, lent bool) {
	now = p.clock(now)
	i, ok := p.lentTo(item)
	if !ok {
		return false, false
	}
	e := &p.recs[i]
	since = min(max(since, e.at), now)
	if kept = p.giveBack(i, now); kept {
		e.at, e.seen = since, since
		p.idle = p.idle[:len(p.idle)-1]
		k := len(p.idle)
		for k > 0 && p.recs[p.idle[k-1]].at > since {
			k--
		}
		p.idle = slices.Insert(p.idle, k, i)
	}
	return kept, true
}
