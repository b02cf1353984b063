-- leaky_bucket: seed 000's funnel, atomic. A bucket of `capacity` (= limit)
-- permits drains continuously and empties from full in `period` ms. A call
-- pours `permits` in; it is admitted if they fit. Water is kept scaled by
-- period_ms (1 permit = period_ms units, leaks capacity units/ms): exact.
-- RESERVE treats the bucket as a FIFO queue: the call is booked behind the
-- water already in it and told how long until that has drained (smooth
-- outflow, no retry storm); it is refused if the queue is full or the wait
-- would exceed max_wait_ms.
-- KEYS[1]  hash {water = permits * period_ms, ts = last update (ms)}
-- ARGV     now_ms (0 = Redis TIME), capacity, period_ms, burst (unused),
--          permits, op (0 acquire, 1 peek, 2 reserve), max_wait_ms
-- reply    {allowed, limit, remaining, retry_after_ms, reset_after_ms, wait_ms}
local key = KEYS[1]
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local capacity, period = tonumber(ARGV[2]), tonumber(ARGV[3])
local permits, op, max_wait = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local full = capacity * period

local state = redis.call('HMGET', key, 'water', 'ts')
local water, ts = tonumber(state[1]), tonumber(state[2])
if not water or not ts then
  water, ts = 0, now
elseif now > ts then
  if now - ts >= math.ceil(water / capacity) then
    water = 0
  else
    water = water - (now - ts) * capacity
  end
  ts = now
end

local function drain_time(units) -- ms until `units` have leaked out
  if units <= 0 then return 0 end
  return math.ceil(units / capacity)
end

local pour = permits * period
local remaining = math.floor((full - water) / period)
local overflow = drain_time(water + pour - full)
local wait = 0
if op == 2 then wait = drain_time(water) end
if overflow > 0 or wait > max_wait then
  local retry = overflow
  if op == 2 then retry = math.max(overflow, wait - max_wait) end
  return {0, capacity, remaining, retry, drain_time(water), 0}
end
if op == 1 then
  return {1, capacity, remaining, -1, drain_time(water), 0}
end
water = water + pour
redis.call('HSET', key, 'water', water, 'ts', ts)
redis.call('PEXPIRE', key, drain_time(water))
return {1, capacity, math.floor((full - water) / period), -1, drain_time(water), wait}
