-- sliding_window: the weighted two-window counter. Windows are aligned to
-- multiples of `period`; the estimate is prev * (period - elapsed) / period
-- + cur. Integer arithmetic scaled by period keeps it exact. O(1) memory.
-- KEYS[1]  hash {start = current window start (ms), cur, prev}
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

local state = redis.call('HMGET', key, 'start', 'cur', 'prev')
local start, cur, prev = tonumber(state[1]), tonumber(state[2]) or 0, tonumber(state[3]) or 0
local window = now - now % period
if not start or window > start + period then
  cur, prev = 0, 0
elseif window == start + period then
  prev, cur = cur, 0
elseif window < start then
  window = start -- an explicit clock went back: stay in the stored window
end
local elapsed = math.max(0, now - window)
local window_left = period - elapsed
local used = prev * window_left + cur * period -- estimate * period

local function reset_after(c, p)
  if c > 0 then return window_left + period end
  if p > 0 then return window_left end
  return 0
end

if used + permits * period > limit * period then
  local retry
  local room = limit - cur - permits
  local need = period -- elapsed time in this window at which prev's weight fits
  if room >= 0 and prev > 0 then need = period - math.floor(room * period / prev) end
  if room >= 0 and need < period then
    retry = need - elapsed
  else
    -- next window: cur becomes prev and decays
    local next_need = 0
    if cur > 0 then next_need = math.max(0, period - math.floor((limit - permits) * period / cur)) end
    retry = window_left + next_need
  end
  return {0, limit, math.max(0, math.floor((limit * period - used) / period)), retry,
          reset_after(cur, prev), 0}
end
if op == 1 then
  return {1, limit, math.floor((limit * period - used) / period), -1, reset_after(cur, prev), 0}
end
cur = cur + permits
used = used + permits * period
redis.call('HSET', key, 'start', window, 'cur', cur, 'prev', prev)
redis.call('PEXPIRE', key, window_left + period)
return {1, limit, math.floor((limit * period - used) / period), -1, reset_after(cur, prev), 0}
