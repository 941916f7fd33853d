package moonredis

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

// The scripts. Each takes one batch of requests for one key and answers
// each in order, so a batch of N costs one round trip and one run, and
// whoever comes first in the batch comes first in the answers. Each has a
// form for several keys too (see perKey).
//
// KEYS[1] is the key's state. ARGV[1] names the limiter and the call slot
// the batch goes through (a random id drawn when it starts, then #n for
// the n-th slot past the first; empty only in a test, to show what it is
// for) and ARGV[2] the batch (that id and a sequence number); ARGV[3] and
// ARGV[4] are the limit's numbers; ARGV[5] the least a written key is
// kept, in milliseconds (a bucket may keep it longer: see bucketBody);
// then, from ARGV[6], three per request:
// n, the most it may wait for its slot in microseconds (0 for an Allow),
// and 1 for a look that takes nothing.
//
// The answer is three numbers per request: 1 or 0 for granted, the wait
// in microseconds (for a grant, until its slot; for a refusal, until it
// would be granted; for a look, what one would wait), and what is left in
// thousandths. A bucket sends them as a table of integers. A window
// sends one string: commas join a request's three and semicolons the
// requests. Its last two are written with %.0f: Redis's Lua writes a
// number from 1e14 on (a wait of three years, a left of a hundred
// billion) with an exponent, which Go's ParseInt refuses.
//
// The clock is Redis's TIME: one clock for every process, so machines
// whose clocks disagree still share one limit.
//
// Counted once: go-redis sends a command again after a network error, and
// a reply lost on the way back would otherwise count its batch twice. A
// key may be in several of a limiter's calls at once, each holding its own
// call slot, and a slot's next batch for the key goes only once the last
// has landed. So the bucket and the counter keep, beside the key's state,
// the last batch each limiter sent through each slot (the field ARGV[1]),
// and answer that batch again from it: the counter keeps
// its answer, the bucket what its answer follows from. The window finds a
// batch's requests among its events by their names. Those are kept at
// least ARGV[5] (twice Config.Timeout): go-redis sends again only within
// the call's ctx, which ends at the Timeout, so a key that would expire
// sooner (a bucket full again a millisecond on) does not take its kept
// batch with it before a resent batch comes.

const prologue = `
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
`

// start begins one key's answer.
const start = `
local res, out = '', nil
`

// kept is how the bucket and the counter look for their batch's answer:
// the field named ARGV[1] holds the limiter's last batch and its answer,
// as name|answer. (Plain string functions, and no string made unless it is
// the answer: a closure or a pattern costs a microsecond here, a fifth of
// a short script's run.)
const kept = `
local kept = got[#got]
if kept and ARGV[1] ~= '' then
  local m = #ARGV[2]
  if string.byte(kept, m + 1) == 124 and string.find(kept, ARGV[2], 1, true) == 1 then return string.sub(kept, m + 2) end
end
`

// emit adds one request's answer, granted (ok), its wait and what is
// left (see above), to res, the answer, when it is the first, and else to
// out, the answers of a batch of more; a table costs a short script a
// thirtieth of its run, so a request alone goes without.
const emit = `
  local one = string.format('%d,%.0f,%.0f', ok, math.ceil(wait), math.floor(left * 1000))
  if i == 6 then res = one elseif out then out[#out + 1] = one else out = {res, one} end
`

// request reads request i's n and most. Strings become numbers by
// arithmetic, which converts once (tonumber converts twice), and the usual
// n of 1 and most of 0 are told apart as strings and not converted at
// all. Each conversion is a strtod in Redis; converting every number
// costs a bucket's run of many keys about a tenth more.
const request = `
  local n, most = 1, 0
  if ARGV[i] ~= '1' then n = ARGV[i] + 0 end
  if ARGV[i + 1] ~= '0' then most = ARGV[i + 1] + 0 end
`

// count reads c, the count of requests of the key that begins at pos in
// the form for several keys; it is usually one.
const count = `
  local c = 1
  if ARGV[pos] ~= '1' then c = ARGV[pos] + 0 end
`

// answer makes res the whole answer: a batch's answers joined.
const answer = `
if out then res = table.concat(out, ';') end
`

// bucketBody is GCRA: field t of the key holds its theoretical arrival
// time (tat), the instant the bucket will be full again; a request of n
// conforms once tat + n*T - burst*T has come. A waiter takes its slot in
// the future by moving tat, so later callers, here or in another process,
// queue behind it.
//
// It answers in a table of numbers, res, three per request, which Redis
// sends as integers: writing a number into a string costs Redis's Lua
// about a microsecond, more than the rest of a request's work. For the
// same reason the batch it keeps is not its answer but what the answer
// follows from: tat before the batch and the TIME it ran at, as the
// strings Redis gave them. A batch sent again is answered again from
// those, and writes nothing.
//
// A write needs the key kept past tat, and ARGV[5] past now for its kept
// batch. Field e of the key holds an instant, in milliseconds, the key is
// known to live to. A write that needs no more reads nothing else. One
// that does reads the key's expiry (PTTL, which only reads), and sets it
// only when it falls short: on from where it was (from now, for a new
// key) by whole steps of G, to between one and two steps past what is
// needed, G being ARGV[5] or a second, whichever is more. Either way e
// becomes what the key lives to. So a busy key's expiry is read and set
// about once in G rather than on every write (PTTL and PEXPIRE are each a
// sixth of a short run), and never made shorter by this script, whatever
// expiry another process (with another Timeout, or a lease) set. A key
// keeps the phase of the instant it was made at, so keys made over time
// expire over time. Expiries on one grid for all keys would make every
// key written within one step expire at one instant: Redis deletes
// expired keys in cycles of up to 25 ms, and such a crowd keeps it in
// them, with every command waiting behind. Scripts without
// e only lengthen the expiry, so e never overstates it; but an older
// script that sets it on every write may shorten it (never below its
// tat), and then e may overstate it. An idle key is gone about 2G after
// its state and kept batches stop mattering, G the largest of its
// writers'.
const bucketBody = `
local got = call('HMGET', KEYS[1], 't', ARGV[1], 'e')
local at, was, again = now, got[1], false
local kept = got[2]
if kept and ARGV[1] ~= '' then
  local m = #ARGV[2]
  if sbyte(kept, m + 1) == 124 and sfind(kept, ARGV[2], 1, true) == 1 then
    local s, u, w = smatch(kept, '^(%d+)|(%d+)|(%d*)$', m + 2)
    if s then
      again, at = true, num(s) * 1000000 + num(u)
      if w == '' then was = nil else was = w end
    end
  end
end
local tat = (was or 0) + 0
if tat < at then tat = at end
local moved = false
for i = 6, #ARGV, 3 do
` + request + `
  local wait = tat + n * T - tau - at
  if wait < 0 then wait = 0 end
  local ok = 0
  if ARGV[i + 2] ~= '1' and wait <= most then
    tat = tat + n * T
    moved = true
    ok = 1
  end
  local left = (at + tau - tat) / T
  if left < 0 then left = 0 end
  res[r + 1], res[r + 2], res[r + 3], r = ok, ceil(wait), floor(left * 1000), r + 3
end
if moved and not again then
  tat = ceil(tat)
  local need = mmax(tat, now + keep) + 1000
  if (got[3] or 0) * 1000 >= need then
    call('HSET', KEYS[1], 't', fmt('%d', tat), ARGV[1], stamp .. (got[1] or ''))
  else
    local to, set = now, true
    if got[1] then
      to = now + call('PTTL', KEYS[1]) * 1000
      set = to < need
    end
    if set then
` + expiryStep + `
    end
    local e = fmt('%d', to / 1000)
    call('HSET', KEYS[1], 't', fmt('%d', tat), ARGV[1], stamp .. (got[1] or ''), 'e', e)
    if set then
      call('PEXPIREAT', KEYS[1], e)
    end
  end
end
`

// expiryStep moves to, the instant in microseconds a key is kept to, on
// from where it is by whole steps of G, to between one and two steps past
// need, G being keep or a second, whichever is more. The bucket and the
// lease script both set a key's expiry by it (see bucketBody).
const expiryStep = `
  local G = math.max(keep, 1000000)
  to = to + (math.floor((need - to) / G) + 2) * G
`

// bucketHead is what a bucket's run reads once, whatever its keys: the
// functions the body calls, as locals (a global costs a table lookup
// each time, and a run of 64 keys looks up over a thousand), the
// limit's numbers, and the stamp each key it writes keeps (the batch's
// name and the TIME it ran at), to which the key adds its tat before.
const bucketHead = `
local num, call, fmt, ceil, floor, mmax = tonumber, redis.call, string.format, math.ceil, math.floor, math.max
local sbyte, sfind, smatch = string.byte, string.find, string.match
local T = ARGV[3] + 0
local tau = T * ARGV[4]
local keep = ARGV[5] * 1000
local stamp = ARGV[2] .. '|' .. t[1] .. '|' .. t[2] .. '|'
`

// inNumbers begins, and numbersEnd ends, a script that answers in a
// table of numbers.
const (
	inNumbers = `
local res, r = {}, 0
`
	numbersEnd = `
return res
`
)

// windowBody is the exact sliding window: the key is a sorted set of the
// events counted, scored by their instant, each counted for W from it. A
// request of n fits at the first instant t, no earlier than the latest
// event, at which the events after t - W and its n are at most allow. A
// request of a batch sent again finds its first event by name, and is
// answered from it.
const windowBody = `
local W = tonumber(ARGV[3])
local allow = tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - W)
local m = redis.call('ZCARD', KEYS[1])
local last = now
if m > 0 then
  local s = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
  if s > last then last = s end
end
local added = false
for i = 6, #ARGV, 3 do
` + request + `
  local look = ARGV[i + 2] == '1'
  local name = ARGV[2] .. ':' .. i .. ':'
  local kept = nil
  if not look and ARGV[1] ~= '' then kept = redis.call('ZSCORE', KEYS[1], name .. '1') end
  local left = allow - m
  if last > now then left = 0 end
  local ok, wait = 0, 0
  if kept then
    local at = tonumber(kept)
    if at < now then at = now end
    ok, wait = 1, at - now
  else
    local at = last
    local need = m - allow + n
    if need > 0 then
      local s = tonumber(redis.call('ZRANGE', KEYS[1], need - 1, need - 1, 'WITHSCORES')[2])
      if s + W > at then at = s + W end
    end
    wait = at - now
    if not look and wait <= most then
      for j = 1, n do
        redis.call('ZADD', KEYS[1], at, name .. j)
      end
      m = m + n
      last = at
      added = true
      ok, left = 1, left - n
    end
  end
  if left < 0 then left = 0 end
` + emit + `end
if added then
  redis.call('PEXPIRE', KEYS[1], math.max(math.ceil((last + W - now) / 1000) + 1, tonumber(ARGV[5])))
end
` + answer + `
return res
`

// counterBody is the approximate sliding window (a sliding-window
// counter): a count per fixed window, in a field of the key named by the
// window's number, and the estimate of the sliding window's count is the
// current window's count plus the previous one's weighted by how much of
// it the sliding window still covers. A waiter is counted at once, in the
// current window, and told to wait until the estimate has room for it; so
// it is granted only a slot in the current window, where it is counted
// (one past it would be counted in a window that has passed by then, and
// let waiters through far beyond the bound).
const counterBody = `
local W = tonumber(ARGV[3])
local allow = tonumber(ARGV[4])
local idx = math.floor(now / W)
local x = (now - idx * W) / W
local cur = string.format('%d', idx)
local got = redis.call('HMGET', KEYS[1], cur, string.format('%d', idx - 1), ARGV[1])
` + kept + `
local c = tonumber(got[1] or '0')
local p = tonumber(got[2] or '0')
local added = 0
for i = 6, #ARGV, 3 do
` + request + `
  local look = ARGV[i + 2] == '1'
  local est = p * (1 - x) + c
  local wait = 0
  if est + n > allow then
    if c + n <= allow then
      wait = (1 - (allow - n - c) / p - x) * W
    else
      wait = (1 - x) * W + (1 - (allow - n) / c) * W
    end
    if wait < 1 then wait = 1 end
  end
  local ok, left = 0, allow - est
  if not look and wait <= most and now + wait < (idx + 1) * W then
    c = c + n
    added = added + n
    ok, left = 1, left - n
  end
  if left < 0 then left = 0 end
` + emit + `end
` + answer + `
if added > 0 then
  redis.call('HSET', KEYS[1], cur, c, ARGV[1], ARGV[2] .. '|' .. res)
  redis.call('HDEL', KEYS[1], string.format('%d', idx - 2))
  redis.call('PEXPIRE', KEYS[1], math.max(math.ceil(2 * W / 1000) + 1, tonumber(ARGV[5])))
end
return res
`

// Each script has a form for several keys in one run. It runs the body
// once per key (KEYS[k]), on the requests that follow that key's count in
// ARGV, after the five arguments every key shares. A window's joins the
// keys' answers with slashes; a bucket's puts every key's numbers in one
// table, in turn. On a loopback redis-server a key in a run of 64 costs
// Redis about half what a run of its own does, and the run takes one
// command to read and one reply to write. Every key of a run shares its
// batch's name, so a run sent again is answered again from each key's
// kept batch. In a cluster, every key of one run must be in one hash slot.
const (
	perKey = `
local function run(key, first, last)
`
	everyKey = `
end
local all, pos = {}, 6
for k = 1, #KEYS do
` + count + `
  all[k] = run(KEYS[k], pos + 1, pos + 3 * c)
  pos = pos + 1 + 3 * c
end
return table.concat(all, '/')
`
)

// several is body as the function run of the form for several keys.
func several(body string) string {
	return prologue + perKey + start + perKeyBody(body) + everyKey
}

// perKeyBody is body on the key and requests run is given.
func perKeyBody(body string) string {
	return strings.NewReplacer("KEYS[1]", "key", "6, #ARGV, 3", "first, last, 3", "i == 6", "i == first").Replace(body)
}

// severalNumbers is the form for several keys of a body that answers in
// numbers: one table of them, every key's in turn.
const severalNumbers = `
end
local pos = 6
for k = 1, #KEYS do
` + count + `
  run(KEYS[k], pos + 1, pos + 3 * c)
  pos = pos + 1 + 3 * c
end
`

var (
	bucketScript  = redis.NewScript(prologue + inNumbers + bucketHead + bucketBody + numbersEnd)
	windowScript  = redis.NewScript(prologue + start + windowBody)
	counterScript = redis.NewScript(prologue + start + counterBody)

	bucketKeys  = redis.NewScript(prologue + inNumbers + bucketHead + perKey + perKeyBody(bucketBody) + severalNumbers + numbersEnd)
	windowKeys  = redis.NewScript(several(windowBody))
	counterKeys = redis.NewScript(several(counterBody))
)

// keysOf is the form for several keys of a script.
func keysOf(s *redis.Script) *redis.Script {
	switch s {
	case windowScript:
		return windowKeys
	case counterScript:
		return counterKeys
	}
	return bucketKeys
}
