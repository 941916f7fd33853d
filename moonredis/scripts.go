package moonredis

import "github.com/redis/go-redis/v9"

// The scripts. Each takes one batch of requests for one key and answers
// each in order, so a batch of N costs one round trip and one run, and
// whoever comes first in the batch comes first in the answers.
//
// KEYS[1] is the key's state; KEYS[2] is where the batch's answer is kept
// for a short while (both carry the same hash tag, so they share a Cluster
// slot). ARGV[1] is unused by the body (the batch id is in KEYS[2]);
// ARGV[2] is how long to keep the answer in milliseconds, 0 for a batch
// that changes nothing; ARGV[3] and ARGV[4] are the limit's numbers; then,
// from ARGV[5], three per request: n, the most it may wait for its slot in
// microseconds (0 for an Allow), and 1 for a look that takes nothing.
//
// The answer is one string, three numbers per request: 1 or 0 for
// granted, the wait in microseconds (for a grant, until its slot; for a
// refusal, until it would be granted; for a look, what one would wait),
// and what is left in thousandths.
//
// The clock is Redis's TIME: one clock for every process, so machines
// whose clocks disagree still share one limit.

// prologue answers a retried batch with the answer it got the first time:
// go-redis sends a command again after a network error, and a reply lost on
// the way back would otherwise count the batch twice.
const prologue = `
local kept = redis.call('GET', KEYS[2])
if kept then return kept end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out = {}
local function put(ok, wait, left)
  if left < 0 then left = 0 end
  out[#out + 1] = ok .. ',' .. string.format('%d', math.ceil(wait)) .. ',' .. string.format('%d', math.floor(left * 1000))
end
`

const epilogue = `
local s = table.concat(out, ';')
local keep = tonumber(ARGV[2])
if keep > 0 then redis.call('SET', KEYS[2], s, 'PX', keep) end
return s
`

// bucketBody is GCRA: the key holds its theoretical arrival time (tat),
// the instant the bucket will be full again; a request of n conforms once
// tat + n*T - burst*T has come. A waiter takes its slot in the future by
// moving tat, so later callers, here or in another process, queue behind
// it.
const bucketBody = `
local T = tonumber(ARGV[3])
local tau = T * tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local moved = false
for i = 5, #ARGV, 3 do
  local n, most, look = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), ARGV[i + 2] == '1'
  local wait = tat + n * T - tau - now
  if wait < 0 then wait = 0 end
  if look then
    put(0, wait, (now + tau - tat) / T)
  elseif wait <= most then
    tat = tat + n * T
    moved = true
    put(1, wait, (now + tau - tat) / T)
  else
    put(0, wait, (now + tau - tat) / T)
  end
end
if moved then
  redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
end
`

// windowBody is the exact sliding window: the key is a sorted set of the
// events counted, scored by their instant, each counted for W from it. A
// request of n fits at the first instant t, no earlier than the latest
// event, at which the events after t - W and its n are at most allow.
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
local id = string.sub(KEYS[2], -16)
for i = 5, #ARGV, 3 do
  local n, most, look = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), ARGV[i + 2] == '1'
  local at = last
  local need = m - allow + n
  if need > 0 then
    local s = tonumber(redis.call('ZRANGE', KEYS[1], need - 1, need - 1, 'WITHSCORES')[2])
    if s + W > at then at = s + W end
  end
  local left = allow - m
  if last > now then left = 0 end
  if look then
    put(0, at - now, left)
  elseif at - now <= most then
    for j = 1, n do
      redis.call('ZADD', KEYS[1], at, id .. ':' .. i .. ':' .. j)
    end
    m = m + n
    last = at
    added = true
    put(1, at - now, left - n)
  else
    put(0, at - now, left)
  end
end
if added then
  redis.call('PEXPIRE', KEYS[1], math.ceil((last + W - now) / 1000) + 1)
end
`

// counterBody is the approximate sliding window (a sliding-window
// counter): a count per fixed window, and the estimate of the sliding
// window's count is the current window's count plus the previous one's
// weighted by how much of it the sliding window still covers. A waiter is
// counted at once, in the current window, and told to wait until the
// estimate has room for it.
const counterBody = `
local W = tonumber(ARGV[3])
local allow = tonumber(ARGV[4])
local idx = math.floor(now / W)
local x = (now - idx * W) / W
local cur = string.format('%d', idx)
local got = redis.call('HMGET', KEYS[1], cur, string.format('%d', idx - 1))
local c = tonumber(got[1] or '0')
local p = tonumber(got[2] or '0')
local added = 0
for i = 5, #ARGV, 3 do
  local n, most, look = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), ARGV[i + 2] == '1'
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
  if look then
    put(0, wait, allow - est)
  elseif wait <= most then
    c = c + n
    added = added + n
    put(1, wait, allow - est - n)
  else
    put(0, wait, allow - est)
  end
end
if added > 0 then
  redis.call('HINCRBY', KEYS[1], cur, added)
  redis.call('HDEL', KEYS[1], string.format('%d', idx - 2))
  redis.call('PEXPIRE', KEYS[1], math.ceil(2 * W / 1000) + 1)
end
`

var (
	bucketScript  = redis.NewScript(prologue + bucketBody + epilogue)
	windowScript  = redis.NewScript(prologue + windowBody + epilogue)
	counterScript = redis.NewScript(prologue + counterBody + epilogue)
)
