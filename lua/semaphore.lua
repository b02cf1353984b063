-- semaphore: a fair counting semaphore with expiring leases (also the lock,
-- with permits_max = 1). Holders are a ZSET scored by lease end; waiters
-- queue in arrival order and stay queued only while they keep checking in
-- (a crashed waiter drops out after waiter_ttl). Wake-ups are PUBLISHed on a
-- per-waiter channel (channels are not keys) to just the waiters that can now
-- be served: no herd, and a waiter subscribes before it tries, so no wake-up
-- is lost. Fencing tokens = max(last + 1, Redis time in us): strictly
-- increasing per name even after the state expired.
-- KEYS[1] holders zset {permit id -> lease end ms}
-- KEYS[2] queue   zset {waiter id -> arrival number}
-- KEYS[3] waiters zset {waiter id -> check-in deadline ms}
-- KEYS[4] meta    hash {seq, fence, max}
-- ARGV[1] op: acquire | release | refresh | leave | info
-- ARGV[2] permit id   ARGV[3] permits_max   ARGV[4] lease_ms
-- ARGV[5] enqueue when not granted (0/1)    ARGV[6] waiter_ttl_ms
-- ARGV[7] wake channel prefix (the waiter id is appended)
-- ARGV[8] PUBLISH, or SPUBLISH in a cluster (the channel shares the keys' slot)
-- reply   acquire: {granted, fence, queue position, ms until the first lease ends or -1}
--         release/refresh/leave: {done}   info: {live holders, live waiters}
local holders, queue, waiters, meta = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op, id = ARGV[1], ARGV[2]
local publish = ARGV[8] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])

if op == 'info' then
  return {redis.call('ZCOUNT', holders, '(' .. now, '+inf'),
          redis.call('ZCOUNT', waiters, '(' .. now, '+inf')}
end

local function purge()
  redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
  local gone = redis.call('ZRANGEBYSCORE', waiters, '-inf', now)
  for _, w in ipairs(gone) do
    redis.call('ZREM', queue, w)
    redis.call('ZREM', waiters, w)
  end
end

local function last_score(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] == nil then return 0 end
  return tonumber(last[2])
end

-- tell the waiters at the head that a permit is theirs to take
local function wake(max)
  local free = max - redis.call('ZCARD', holders)
  if free <= 0 then return end
  for _, w in ipairs(redis.call('ZRANGE', queue, 0, free - 1)) do
    redis.call(publish, ARGV[7] .. w, 'wake')
  end
end

-- every key lives exactly as long as something in it does
local function touch()
  local holders_end, waiters_end = last_score(holders), last_score(waiters)
  if holders_end > now then redis.call('PEXPIRE', holders, holders_end - now) end
  if waiters_end > now then
    redis.call('PEXPIRE', queue, waiters_end - now)
    redis.call('PEXPIRE', waiters, waiters_end - now)
  end
  local keep = math.max(holders_end, waiters_end) - now
  if keep > 0 then redis.call('PEXPIRE', meta, keep) else redis.call('DEL', meta) end
end

purge()
local stored_max = tonumber(redis.call('HGET', meta, 'max')) or 1

if op == 'release' or op == 'refresh' then
  local lease_end = tonumber(redis.call('ZSCORE', holders, id))
  if not lease_end then return {0} end -- unknown, or expired and purged above
  if op == 'release' then
    redis.call('ZREM', holders, id)
    wake(stored_max)
  else
    redis.call('ZADD', holders, 'XX', now + tonumber(ARGV[4]), id)
  end
  touch()
  return {1}
end

if op == 'leave' then
  local left = redis.call('ZREM', queue, id)
  redis.call('ZREM', waiters, id)
  wake(stored_max)
  touch()
  return {left}
end

-- acquire
local max, lease = tonumber(ARGV[3]), tonumber(ARGV[4])
local rank = redis.call('ZRANK', queue, id)
local position = rank or redis.call('ZCARD', queue)
if position < max - redis.call('ZCARD', holders) then
  redis.call('ZADD', holders, now + lease, id)
  redis.call('ZREM', queue, id)
  redis.call('ZREM', waiters, id)
  local fence = math.max((tonumber(redis.call('HGET', meta, 'fence')) or 0) + 1, now_us)
  redis.call('HSET', meta, 'fence', fence, 'max', max)
  if max > stored_max then wake(max) end
  touch()
  return {1, fence, -1, -1}
end
if ARGV[5] == '1' then
  if not rank then
    redis.call('ZADD', queue, redis.call('HINCRBY', meta, 'seq', 1), id)
  end
  redis.call('ZADD', waiters, now + tonumber(ARGV[6]), id)
  redis.call('HSET', meta, 'max', max)
end
if max > stored_max then wake(max) end
touch()
local first = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
local first_end = -1
if first[2] ~= nil then first_end = tonumber(first[2]) - now end
return {0, 0, position, first_end}
