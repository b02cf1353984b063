-- fixed_window: at most `limit` permits per window of `period` ms. A window
-- opens at the first permit taken after the previous one closed (seed 001's
-- INCR + EXPIRE, with the start stored so explicit clocks work too).
-- KEYS[1]  hash {start = window start (ms), count = permits taken}
-- ARGV     now_ms (0 = Redis TIME), limit, period_ms, burst (unused),
--          permits, op (0 acquire, 1 peek), max_wait_ms (unused)
-- reply    {allowed, limit, remaining, retry_after_ms, reset_after_ms, wait_ms}
local key = KEYS[1]
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local limit, period = tonumber(ARGV[2]), tonumber(ARGV[3])
local permits, op = tonumber(ARGV[5]), tonumber(ARGV[6])

local state = redis.call('HMGET', key, 'start', 'count')
local start, count = tonumber(state[1]), tonumber(state[2])
if not start or not count or now >= start + period then
  start, count = now, 0
end
local window_left = start + period - now

if count + permits > limit then
  return {0, limit, limit - count, window_left, window_left, 0}
end
if op == 1 then
  local reset_after = 0
  if count > 0 then reset_after = window_left end
  return {1, limit, limit - count, -1, reset_after, 0}
end
count = count + permits
redis.call('HSET', key, 'start', start, 'count', count)
redis.call('PEXPIRE', key, window_left)
return {1, limit, limit - count, -1, window_left, 0}
