-- semaphore: a fair counting semaphore with expiring leases (also the lock,
-- with permits_max = 1). Holders are a ZSET scored by lease end; waiters
-- queue in arrival order and stay queued only while they keep checking in
-- (a crashed waiter drops out after waiter_ttl). Wake-ups are PUBLISHed on a
-- per-waiter channel (channels are not keys) to just the waiters that can now
-- be served: no herd, and a waiter subscribes before it tries, so no wake-up
-- is lost. Fencing tokens = max(last + 1, Redis time in us): strictly
-- increasing per name even after the state expired.
-- Bounded work per call: expired holders and crashed waiters are deleted at
-- most PURGE_MAX per call (oldest first) and the ones left behind are
-- skipped by every count (ZCOUNT over live scores), so results do not depend
-- on how far the clean-up has got; at most WAKE_MAX waiters are woken per
-- call (each grant to a woken waiter wakes the next one in line).
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

local PURGE_MAX = 250
local WAKE_MAX = 100
local live_from = string.format('(%d', now)
local dead_to = string.format('%d', now)

if op == 'info' then
  return {redis.call('ZCOUNT', holders, live_from, '+inf'),
          redis.call('ZCOUNT', waiters, live_from, '+inf')}
end

local function purge()
  local expired = redis.call('ZCOUNT', holders, '-inf', dead_to)
  if expired > 0 then
    redis.call('ZREMRANGEBYRANK', holders, 0, math.min(expired, PURGE_MAX) - 1)
  end
  local gone = redis.call('ZRANGEBYSCORE', waiters, '-inf', dead_to, 'LIMIT', 0, PURGE_MAX)
  if #gone > 0 then
    redis.call('ZREMRANGEBYRANK', waiters, 0, #gone - 1)
    for i = 1, #gone, 500 do
      redis.call('ZREM', queue, unpack(gone, i, math.min(i + 499, #gone)))
    end
  end
end

local function live_holders() return redis.call('ZCOUNT', holders, live_from, '+inf') end
-- crashed waiters still queued (more than PURGE_MAX crashed since the last call)
local function dead_waiters() return redis.call('ZCOUNT', waiters, '-inf', dead_to) end

local function last_score(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] == nil then return 0 end
  return tonumber(last[2])
end

-- tell the waiters at the head that a permit is theirs to take (crashed ones
-- not yet deleted may be among them: as many more are told)
local function wake(max)
  local free = max - live_holders()
  if free <= 0 then return end
  local n = math.min(free + dead_waiters(), WAKE_MAX)
  for _, w in ipairs(redis.call('ZRANGE', queue, 0, n - 1)) do
    redis.call(publish, ARGV[7] .. w, 'wake')
  end
end

-- a woken waiter took its permit: the next one in line past the woken ones
local function wake_next(max)
  if max - live_holders() + dead_waiters() < WAKE_MAX then return end
  for _, w in ipairs(redis.call('ZRANGE', queue, WAKE_MAX - 1, WAKE_MAX - 1)) do
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
  if not lease_end or lease_end <= now then -- unknown, or expired
    if lease_end then redis.call('ZREM', holders, id) end
    return {0}
  end
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
if rank then
  local deadline = tonumber(redis.call('ZSCORE', waiters, id))
  if not deadline or deadline <= now then -- it stopped checking in: it left the queue
    redis.call('ZREM', queue, id)
    redis.call('ZREM', waiters, id)
    rank = nil
  end
end
local free = max - live_holders()
local dead = dead_waiters()
local queued = redis.call('ZCARD', queue)
-- live waiters ahead of this caller: exact unless crashed waiters are still
-- being deleted, then between lo and hi (each call deletes PURGE_MAX more)
local lo, hi = queued - dead, queued - dead
if rank then
  lo = rank - math.min(rank, dead)
  hi = rank - math.max(0, dead - (queued - 1 - rank))
end
if hi < free then
  redis.call('ZADD', holders, now + lease, id)
  redis.call('ZREM', queue, id)
  redis.call('ZREM', waiters, id)
  local fence = math.max((tonumber(redis.call('HGET', meta, 'fence')) or 0) + 1, now_us)
  redis.call('HSET', meta, 'fence', fence, 'max', max)
  if max > stored_max then wake(max) elseif rank then wake_next(max) end
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
local first = redis.call('ZRANGEBYSCORE', holders, live_from, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local first_end = -1
if first[2] ~= nil then first_end = tonumber(first[2]) - now end
-- undecided while the clean-up goes on: try again at once
if lo < free then first_end = 0 end
return {0, 0, lo, first_end}
