-- sliding_log: exact sliding window. At most `limit` permits in ANY interval
-- of `period` ms. One ZSET member per permit (score = time taken, member =
-- "<ms>-<n>", unique and readable), so memory is O(limit) per entity.
-- A permit taken at t counts during [t, t + period).
-- KEYS[1]  zset of permits
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
local live_from = string.format('(%d', now - period)

if op == 0 then
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - period)
end
local count = redis.call('ZCOUNT', key, live_from, '+inf')

local function newest_end()
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if newest[2] == nil then return 0 end
  return tonumber(newest[2]) + period - now
end

if count + permits > limit then
  -- wait until enough of the oldest live permits have slid out
  local nth = redis.call('ZRANGEBYSCORE', key, live_from, '+inf', 'WITHSCORES',
                         'LIMIT', count + permits - limit - 1, 1)
  return {0, limit, limit - count, tonumber(nth[2]) + period - now, newest_end(), 0}
end
if op == 1 then
  local reset_after = 0
  if count > 0 then reset_after = newest_end() end
  return {1, limit, limit - count, -1, reset_after, 0}
end

local seq = redis.call('ZCOUNT', key, now, now)
local batch = {}
for i = 0, permits - 1 do
  batch[#batch + 1] = now
  batch[#batch + 1] = string.format('%d-%d', now, seq + i)
  if #batch >= 1000 or i == permits - 1 then
    redis.call('ZADD', key, unpack(batch))
    batch = {}
  end
end
local reset_after = newest_end()
redis.call('PEXPIRE', key, reset_after)
return {1, limit, limit - count - permits, -1, reset_after, 0}
