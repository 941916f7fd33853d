package moonredis

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// leaseBody takes a lease of a bucket's tokens, gives unspent ones back,
// or both, in one run on the key's GCRA state: field t of the key, the
// same theoretical arrival time (tat) the bucket script moves. So leases
// and requests sent one by one draw on one count, and the fleet never
// takes more than the limit between them.
//
// KEYS[1] is the key's state. ARGV[1] names the lessee (the Bucket in
// one process) and ARGV[2] the call (that name and a sequence number).
// ARGV[3] is microseconds a token, ARGV[4] the burst, ARGV[5] the least a
// written key is kept in milliseconds. ARGV[6] is the tokens asked for,
// ARGV[7] those the lessee still holds, ARGV[8] those it gives back, and
// ARGV[9] how long a lessee counts as one after its last call, in
// microseconds.
//
// The rules:
//   - A give-back moves tat back by the tokens given, never below now:
//     the bucket gets back what the lessee did not spend, and never more
//     than its burst.
//   - The field lessees lists who asked within ARGV[9], with when each
//     stops counting. A lessee that asks counts itself. Each may hold at
//     most its share of the burst, burst/lessees, rounded down, and at
//     least 1.
//   - The grant is the least of the ask, the whole tokens the bucket
//     holds after the give-back, and the share less what the lessee
//     holds. It may be 0, and then nothing moves but the give-back.
//   - When the grant falls short of the ask, wait is how long until the
//     bucket holds the grant times the lessees, or half of what the
//     lessee may take (the ask or its share, whichever is less), if
//     more; at least one token, at most the burst. The lessee calls
//     again no sooner. Those tokens stay in Redis for anyone meanwhile.
//     So each lessee calls about when the others have earned as much as
//     it took, and one that took little calls again sooner: at the
//     limit, they share it about evenly.
//   - A lessee that gives back and asks for nothing leaves the list.
//   - The key's expiry moves on in a bucket's steps (see bucketBody),
//     with ARGV[9] in its keep, and without field e: a lease call reads
//     PTTL every time.
//
// The answer is grant,wait,lessees in whole numbers. Like a bucket's
// batch, a call sent again (go-redis resends after a network error) finds
// its answer in the field named lease: and the lessee, and changes
// nothing more: a lessee sends a key's next call only once the last has
// ended.
const leaseBody = `
local me = 'lease:' .. ARGV[1]
local got = redis.call('HMGET', KEYS[1], 't', me, 'lessees')
local kept = got[2]
if kept then
  local m = #ARGV[2]
  if string.byte(kept, m + 1) == 124 and string.find(kept, ARGV[2], 1, true) == 1 then return string.sub(kept, m + 2) end
end
local T = tonumber(ARGV[3])
local burst = tonumber(ARGV[4])
local tau = T * burst
local ask, held, give = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local tat = tonumber(got[1] or '0')
if tat < now then tat = now end
if give > 0 then
  tat = tat - give * T
  if tat < now then tat = now end
end
local list, n = {}, 0
for id, till in string.gmatch(got[3] or '', '([^ =]+)=(%d+)') do
  if id ~= ARGV[1] and tonumber(till) > now then
    list[#list + 1] = id .. '=' .. till
    n = n + 1
  end
end
if ask > 0 then
  list[#list + 1] = ARGV[1] .. '=' .. string.format('%.0f', now + tonumber(ARGV[9]))
  n = n + 1
end
local grant, wait = 0, 0
if ask > 0 then
  local share = math.max(math.floor(burst / n), 1)
  grant = math.min(ask, math.floor((now + tau - tat) / T), share - held)
  if grant < 0 then grant = 0 end
  tat = tat + grant * T
  if grant < ask then
    local need = math.min(math.max(n * grant, math.floor(math.min(ask, share) / 2), 1), burst)
    wait = tat + need * T - tau - now
    if wait < 0 then wait = 0 end
  end
end
local res = string.format('%.0f,%.0f,%d', grant, math.ceil(wait), n)
tat = math.ceil(tat)
redis.call('HSET', KEYS[1], 't', string.format('%.0f', tat), me, ARGV[2] .. '|' .. res, 'lessees', table.concat(list, ' '))
local keep = math.max(tonumber(ARGV[5]), tonumber(ARGV[9]) / 1000) * 1000
local need = math.max(tat, now + keep) + 1000
local to = now
if got[1] then to = now + redis.call('PTTL', KEYS[1]) * 1000 end
if to < need then
` + expiryStep + `
  redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', to / 1000))
end
return res
`

var leaseScript = redis.NewScript(prologue + leaseBody)

// grant is a lease call's answer.
type grant struct {
	tokens  int64 // granted
	wait    int64 // microseconds until the call may be made again, when the grant fell short
	lessees int64 // lessees of the key, the caller among them if it asked
}

// parseGrant reads a lease call's answer.
func parseGrant(s string) (grant, error) {
	a, rest, ok1 := strings.Cut(s, ",")
	b, c, ok2 := strings.Cut(rest, ",")
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	z, err3 := strconv.ParseInt(c, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || err3 != nil || x < 0 || y < 0 || z < 0 {
		return grant{}, fmt.Errorf("moonredis: unreadable lease answer %q", s)
	}
	return grant{tokens: x, wait: y, lessees: z}, nil
}
