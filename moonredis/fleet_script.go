package moonredis

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/moonpool-go/moonpool/policy"
	"github.com/redis/go-redis/v9"
)

// fleetScript is the fleet's one script. Every step a replica takes in
// Redis is one run of it, so each is atomic and costs one round trip.
//
// KEYS[1] is the state, a hash: b, when Redis first wrote it (its birth,
// which changes when Redis loses it); e, the epoch, which grows by one
// with each hold and each recovery; s, "held" or "ramp" (none is open);
// t, when s began; u, with held, when the hold ends unless a failed probe
// renews it; n, with ramp, how many replicas share the ramp. KEYS[2] is
// the failures, a sorted set of replicas scored by their last failure.
// KEYS[3] is the members, a sorted set of replicas scored by their last
// step. KEYS[4] is the probe lease: the holder's id, or "-" while the
// fleet waits out ProbeEvery after a failed probe.
//
// ARGV[1] is the step, ARGV[2] the replica's id, ARGV[3] how long a
// member stays live without a step (µs), ARGV[4] the channel to publish
// on. Then, by step:
//   - "sync": nothing more. A heartbeat and a read of the state.
//   - "fail": the window (µs), the quorum, and the hold (µs). Records the
//     replica's failure; holds the fleet once min(quorum, live members)
//     replicas have failed within the window.
//   - "lease": the lease's length (ms). While held, takes the lease if
//     nobody has it.
//   - "probed": 1 or 0 for the probe's outcome, the epoch of the hold it
//     probed, the hold (µs), and ProbeEvery (ms). A probe that worked ends
//     the hold: the fleet ramps. One that failed renews the hold and
//     keeps the lease from everyone for ProbeEvery.
//
// The answer is the state as a line of numbers and words (see fleetLine),
// and a change of state is published on the channel as the same line, so
// every replica reads both the same way. Times are Redis's TIME, in
// microseconds: a replica reads only spans from them (how long ago a
// state began, how long a hold has left), never instants, so machines
// whose clocks disagree still agree on the fleet.
const fleetBody = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local step, id, live, channel = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local function num(x) return string.format('%.0f', x) end
redis.call('ZADD', KEYS[3], num(now), id)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', num(now - live))
redis.call('PEXPIRE', KEYS[3], math.ceil(live / 1000) + 1000)
local members = redis.call('ZCARD', KEYS[3])
local h = redis.call('HMGET', KEYS[1], 'b', 'e', 's', 't', 'u', 'n')
local born, epoch, state = tonumber(h[1] or '0'), tonumber(h[2] or '0'), h[3] or 'open'
local since, till, share = tonumber(h[4] or '0'), tonumber(h[5] or '0'), tonumber(h[6] or '1')
if state == 'held' and till <= now then state = 'open' end
local changed = false
local function become(s)
  if born == 0 then born = now end
  epoch = epoch + 1
  state, since, changed = s, now, true
  redis.call('HSET', KEYS[1], 'b', num(born), 'e', epoch, 's', s, 't', num(now), 'u', num(till), 'n', share)
  redis.call('PEXPIRE', KEYS[1], 86400000)
  redis.call('DEL', KEYS[2], KEYS[4])
end
local holder, left = 0, -2
if step == 'fail' then
  local window, quorum, hold = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
  redis.call('ZADD', KEYS[2], num(now), id)
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', num(now - window))
  redis.call('PEXPIRE', KEYS[2], math.ceil(window / 1000) + 1)
  if state ~= 'held' and redis.call('ZCARD', KEYS[2]) >= math.min(quorum, members) then
    till = now + hold
    become('held')
  end
elseif step == 'lease' then
  if state == 'held' then
    if redis.call('SET', KEYS[4], id, 'NX', 'PX', ARGV[5]) or redis.call('GET', KEYS[4]) == id then holder = 1 end
    left = redis.call('PTTL', KEYS[4])
  end
elseif step == 'probed' then
  if state == 'held' and tonumber(ARGV[6]) == epoch then
    if ARGV[5] == '1' then
      till, share = 0, math.max(members, 1)
      become('ramp')
    else
      till = now + tonumber(ARGV[7])
      redis.call('HSET', KEYS[1], 'u', num(till))
      redis.call('SET', KEYS[4], '-', 'PX', ARGV[8])
    end
  end
end
local line = table.concat({num(born), epoch, state, num(since), num(till), share, num(now), members}, ' ')
if changed then redis.call('PUBLISH', channel, line) end
return line .. ' ' .. holder .. ' ' .. left
`

var fleetScript = redis.NewScript(fleetBody)

// The steps the script takes (ARGV[1]).
const (
	stepSync   = "sync"
	stepFail   = "fail"
	stepLease  = "lease"
	stepProbed = "probed"
)

// fleetLine is the fleet's state as one script run or message told it.
type fleetLine struct {
	born    int64 // when Redis first wrote the state (µs, Redis's clock): a new birth is a new history
	epoch   int64
	state   policy.FleetState // FleetOpen, FleetHeld or FleetRamp
	age     int64             // how long ago the state began (µs)
	left    int64             // with FleetHeld: how long the hold has left (µs)
	share   int
	members int
	at      int64 // when Redis read its clock for this line (µs)
	holder  bool  // a lease step: this replica holds the lease
	lease   int64 // a lease step: how long the lease has left (ms); < 0 when there is none
}

// parseFleetLine reads the script's answer, or a message published with
// the first eight of its fields.
func parseFleetLine(s string) (fleetLine, error) {
	f := strings.Fields(s)
	if len(f) != 8 && len(f) != 10 {
		return fleetLine{}, fmt.Errorf("moonredis: unreadable fleet state %q", s)
	}
	var n [10]int64
	for i, x := range f {
		if i == 2 {
			continue
		}
		v, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return fleetLine{}, fmt.Errorf("moonredis: unreadable fleet state %q", s)
		}
		n[i] = v
	}
	l := fleetLine{born: n[0], epoch: n[1], age: n[6] - n[3], share: int(n[5]), members: int(n[7]), at: n[6], lease: -1}
	switch f[2] {
	case "open":
	case "held":
		l.state, l.left = policy.FleetHeld, n[4]-n[6]
	case "ramp":
		l.state = policy.FleetRamp
	default:
		return fleetLine{}, fmt.Errorf("moonredis: unknown fleet state %q", f[2])
	}
	if len(f) == 10 {
		l.holder, l.lease = n[8] == 1, n[9]
	}
	return l, nil
}

// newer reports whether l says more than k, the state last heard. Within
// one history (one birth) a later epoch says more, and the same epoch
// read later, which may find the hold renewed or over. Across histories
// (Redis lost the state, and its epochs began again) the one read later
// says more: a read from before the state was first written is older
// than the state, not a loss of it. Read at the same microsecond, the one
// born later does.
func (l fleetLine) newer(k fleetLine) bool {
	switch {
	case l.born != k.born:
		return l.at > k.at || l.at == k.at && l.born > k.born
	case l.epoch != k.epoch:
		return l.epoch > k.epoch
	}
	return l.at >= k.at
}
