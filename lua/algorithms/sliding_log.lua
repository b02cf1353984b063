-- sliding_log: exact sliding window. At most `limit` permits in ANY interval
-- of `period` ms. A permit taken at t counts during [t, t + period).
-- One ZSET member per admitted call (not per permit), scored by the time it
-- was taken: "<ms>:<total>:<permits>:<edge>". `total` is the running count
-- of permits taken through this call (16 digits, modulo 2 x 10^15), so the
-- permits of any run of members is a difference of two totals: the live
-- count, and how long until `need` of them have slid out, take a few
-- O(log n) lookups and never walk members or permits. Within one ms members
-- sort by total (same "<ms>:" prefix, fixed width): ZSET order is call order.
-- `edge`: what had slid out when the call was admitted (the largest
-- now - period of all admitted calls so far); a permit at or before it never
-- counts again, even if the period is made longer. Memory and time grow
-- with the number of calls in the window, never with permits or limit.
-- Members at or before the newest member's edge are deleted lazily, at most
-- PURGE_MAX per acquire (oldest first): the ones still there do not change
-- any result.
-- A clock that goes back logs the call at the newest member's time (later,
-- so stricter, never looser).
-- A rate change keeps the log: the new period and limit apply to it at once.
-- A refund takes back the newest permits.
-- Old layout (one "<ms>-<n>" member per permit): peek reads it as it is;
-- the first acquire migrates it: exactly when its live permits span at most
-- MIGRATE_MAX distinct ms, else the older ones count as taken at the oldest
-- of the newest MIGRATE_MAX ms (stricter for at most one period).
-- LEASE logs the block as ONE member at the end of its validity (at most
-- half the period; later if the newest member is later), so it counts from
-- before the grant until validity + period after it. Handle: that member;
-- GIVE_BACK only while it is the newest member: it is logged again with
-- the used permits at the latest time they can have been (now, or the end
-- of the validity; not before the member below it).
-- State: zset {"<ms>:<total>:<permits>:<edge>" -> ms}
ALG.sliding_log = function(key, now_us, r, permits, op, max_wait, _, handle)
  local now, limit, period = math.floor(now_us / 1000), r.limit, r.period
  local WRAP = 2000000000000000 -- totals modulo 2 x 10^15 (limit <= 10^15)
  local PURGE_MAX = 1000
  local MIGRATE_MAX = 200
  local function int(n) return string.format('%d', n) end

  -- {ms, total, permits, edge, member} at rank; total nil: old layout
  local function entry(rank)
    local m = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
    if m[1] == nil then return nil end
    local total, n, edge = string.match(m[1], '^%d+:(%d+):(%d+):(%-?%d+)$')
    if not total then return {tonumber(m[2]), nil, 1, nil, m[1]} end
    return {tonumber(m[2]), tonumber(total), tonumber(n), tonumber(edge), m[1]}
  end

  local function member(ms, total, n, edge)
    return string.format('%d:%016d:%d:%d', ms, total, n, edge)
  end

  local edge = now - period -- scored <= edge: slid out
  local newest = entry(-1)

  if newest and not newest[2] then
    -- the old layout: one member per permit
    local expired = redis.call('ZCOUNT', key, '-inf', int(edge))
    local count = redis.call('ZCARD', key) - expired
    if op == PEEK then
      local reset_after = 0
      if count > 0 then reset_after = newest[1] + period - now end
      if count + permits > limit then
        local nth = entry(expired + math.max(0, count + permits - limit - 1))
        return {0, limit, math.max(0, limit - count), nth[1] + period - now, reset_after, 0}
      end
      return {1, limit, limit - count, -1, reset_after, 0}
    end
    -- migrate: one member per distinct ms, newest first, MIGRATE_MAX at most
    local groups, at, left = {}, '+inf', count
    while left > 0 do
      local g = redis.call('ZREVRANGEBYSCORE', key, at, '(' .. int(edge), 'WITHSCORES', 'LIMIT', 0, 1)
      local ms = tonumber(g[2])
      local n = redis.call('ZCOUNT', key, int(ms), int(ms))
      if #groups == MIGRATE_MAX - 1 then n = left end -- the rest, as if taken at ms
      groups[#groups + 1] = {ms, n}
      left = left - n
      at = '(' .. int(ms)
    end
    -- a large one is freed off the main thread
    redis.call(redis.call('ZCARD', key) > 10000 and 'UNLINK' or 'DEL', key)
    local total = 0
    for i = #groups, 1, -1 do
      total = total + groups[i][2]
      redis.call('ZADD', key, int(groups[i][1]), member(groups[i][1], total, groups[i][2], edge))
    end
    newest = entry(-1)
  end

  -- live permits = newest total - the total just before the oldest live member
  local count, expired = 0, 0
  if newest then
    edge = math.max(edge, newest[4])
    expired = redis.call('ZCOUNT', key, '-inf', int(edge))
    local base
    if expired > 0 then
      base = entry(expired - 1)[2]
    else
      local oldest = entry(0)
      base = oldest[2] - oldest[3]
    end
    count = (newest[2] - base) % WRAP
  end

  if op ~= PEEK and expired > 0 then
    -- delete only what had slid out for good (at or before the stored edge)
    local gone = redis.call('ZCOUNT', key, '-inf', int(newest[4]))
    gone = math.min(gone, PURGE_MAX)
    if gone > 0 then redis.call('ZREMRANGEBYRANK', key, 0, gone - 1) end
    expired = expired - gone
  end

  -- the live member holding the k-th oldest live permit: the first whose
  -- total reaches base + k (binary search on rank)
  local function holding(k)
    local base = newest[2] - count
    local lo, hi = expired, redis.call('ZCARD', key) - 1 -- the newest qualifies
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if (entry(mid)[2] - base) % WRAP >= k then hi = mid else lo = mid + 1 end
    end
    return entry(lo)
  end

  if op == GIVE_BACK then
    if not (newest and newest[5] == handle and permits <= newest[3] and now < newest[1] + period) then
      return {1, limit, math.max(0, limit - count), -1, count > 0 and newest[1] + period - now or 0, 0, 0}
    end
    local used, below = newest[3] - permits, entry(-2)
    local at, total = math.min(now, newest[1]), used
    if below then
      at = math.max(at, below[1])
      total = below[2] + used
      if at ~= below[1] and total >= WRAP then total = total - WRAP end
    end
    count = count - permits
    local reset_after = 0
    if used > 0 then reset_after = at + period - now elseif count > 0 then reset_after = below[1] + period - now end
    return {1, limit, math.max(0, limit - count), -1, reset_after, 0, permits}, function()
      redis.call('ZREM', key, newest[5])
      if used > 0 then
        redis.call('ZADD', key, int(at), member(at, total, used, newest[4]))
        redis.call('PEXPIRE', key, at + period - now)
      end
    end
  end
  if op == REFUND then
    local left = math.min(permits, count)
    local reset_after = 0 -- when the newest permit left slides out
    if count - left > 0 then reset_after = holding(count - left)[1] + period - now end
    count = count - left
    return {1, limit, math.max(0, limit - count), -1, reset_after, 0}, function()
      while left > 0 do
        local e = entry(-1)
        redis.call('ZREM', key, e[5])
        if e[3] > left then -- keep the rest of this call's permits
          redis.call('ZADD', key, int(e[1]), member(e[1], e[2] - left, e[3] - left, e[4]))
          -- the ZREM may have emptied (deleted) the key: its TTL again
          redis.call('PEXPIRE', key, math.max(1, e[1] + period - now))
        end
        left = left - math.min(left, e[3])
      end
    end
  end

  if count + permits > limit then
    -- wait until the oldest live permits the request needs have slid out
    return {0, limit, math.max(0, limit - count), holding(count + permits - limit)[1] + period - now,
            newest[1] + period - now, 0}
  end
  if op == PEEK then
    local reset_after = 0
    if count > 0 then reset_after = newest[1] + period - now end
    return {1, limit, limit - count, -1, reset_after, 0}
  end

  if op == LEASE then
    local at, total = now + math.min(max_wait, math.floor(period / 2)), permits
    if newest then
      at = math.max(at, newest[1])
      total = newest[2] + permits
      if at ~= newest[1] and total >= WRAP then total = total - WRAP end
    end
    local m = member(at, total, permits, edge)
    return {1, limit, limit - count - permits, -1, at + period - now, math.min(max_wait, math.floor(period / 2)), m},
      function()
        redis.call('ZADD', key, int(at), m)
        redis.call('PEXPIRE', key, at + period - now)
      end
  end
  return {1, limit, limit - count - permits, -1, math.max(now, newest and newest[1] or now) + period - now, 0},
    function()
      local at, total = now, permits
      if newest then
        at = math.max(now, newest[1])
        total = newest[2] + permits
        -- wrap only between ms, so that within one ms members sort by total
        if at ~= newest[1] and total >= WRAP then total = total - WRAP end
      end
      redis.call('ZADD', key, int(at), member(at, total, permits, edge))
      redis.call('PEXPIRE', key, at + period - now)
    end
end
