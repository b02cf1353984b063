-- token_bucket: holds up to `burst` tokens, refilled continuously with
-- `limit` tokens per `period` ms, starts full (seed 004). Levels are kept
-- scaled by period_ms (1 token = period_ms units, refill = limit units/ms) so
-- all arithmetic is exact integers. RESERVE may take the bucket below zero
-- (a debt the next callers wait out), bounded by max_wait_ms.
-- KEYS[1]  hash {level = tokens * period_ms, ts = last update (ms)}
-- ARGV     now_ms (0 = Redis TIME), limit, period_ms, burst, permits,
--          op (0 acquire, 1 peek, 2 reserve), max_wait_ms
-- reply    {allowed, limit, remaining, retry_after_ms, reset_after_ms, wait_ms}
local key = KEYS[1]
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local limit, period, burst = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local permits, op, max_wait = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local full = burst * period

local state = redis.call('HMGET', key, 'level', 'ts')
local level, ts = tonumber(state[1]), tonumber(state[2])
if not level or not ts then
  level, ts = full, now
elseif now > ts then
  -- compare times, not products, so a long idle gap cannot overflow
  if now - ts >= math.ceil((full - level) / limit) then
    level = full
  else
    level = level + (now - ts) * limit
  end
  ts = now
end

local function time_for(units) -- ms until `units` more have been refilled
  if units <= 0 then return 0 end
  return math.ceil(units / limit)
end

local need = permits * period
local wait = time_for(need - level)
if wait > 0 then
  if op ~= 2 or wait > max_wait then
    local retry = wait
    if op == 2 then retry = wait - max_wait end
    return {0, burst, math.max(0, math.floor(level / period)), retry, time_for(full - level), 0}
  end
end
if op == 1 then
  return {1, burst, math.floor(level / period), -1, time_for(full - level), 0}
end
level = level - need
local reset_after = time_for(full - level)
redis.call('HSET', key, 'level', level, 'ts', ts)
redis.call('PEXPIRE', key, math.max(1, reset_after))
return {1, burst, math.max(0, math.floor(level / period)), -1, reset_after, wait}
