-- gcra: generic cell rate algorithm, as redis-cell and go-redis redis_rate.
-- `limit` per `period` ms, up to `burst` at once. State is the theoretical
-- arrival time (TAT) in microseconds; the emission interval is rounded up to
-- a whole microsecond so rounding can only make the limiter stricter.
-- RESERVE books the slot even when it lies in the future (up to max_wait_ms)
-- and returns the wait.
-- KEYS[1]  string: TAT (us)
-- ARGV     now_ms (0 = Redis TIME), limit, period_ms, burst, permits,
--          op (0 acquire, 1 peek, 2 reserve), max_wait_ms
-- reply    {allowed, limit, remaining, retry_after_ms, reset_after_ms, wait_ms}
local key = KEYS[1]
local now = tonumber(ARGV[1]) * 1000
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local limit, period, burst = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local permits, op, max_wait = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]) * 1000

local interval = math.ceil(period * 1000 / limit)
local tolerance = interval * burst
local tat = tonumber(redis.call('GET', key)) or now
tat = math.max(tat, now)

local function ms(us) return math.ceil(us / 1000) end
local function available(t) return math.max(0, math.floor((now - (t - tolerance)) / interval)) end

local new_tat = tat + interval * permits
local diff = now - (new_tat - tolerance)
local wait = 0
if diff < 0 then
  if op ~= 2 or -diff > max_wait then
    local retry = -diff
    if op == 2 then retry = -diff - max_wait end
    return {0, burst, available(tat), ms(retry), ms(tat - now), 0}
  end
  wait = -diff
end
if op == 1 then
  return {1, burst, available(tat), -1, ms(tat - now), 0}
end
redis.call('SET', key, new_tat, 'PX', math.max(1, ms(new_tat - now)))
return {1, burst, available(new_tat), -1, ms(new_tat - now), ms(wait)}
