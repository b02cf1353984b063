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
-- 1,000 per script call (oldest first; a batch call's decisions share them):
-- the ones still there do not change any result.
-- A clock that goes back logs the call at the newest member's time (later,
-- so stricter, never looser).
-- A rate change keeps the log: the new period and limit apply to it at once.
-- A refund takes back the oldest live permits without touching the calls:
-- one member scored +inf, "~<from>:<to>", says the permits with totals in
-- (from, to] were taken back. While the oldest live member's first permit
-- is in that range, the count starts at `to`; once an older member lives
-- again they count again (stricter); once the oldest live member is past
-- `to` the marker is stale, and the next admission deletes it. So a refund
-- costs a few lookups and one write, whatever it takes back.
-- LEASE logs the block as ONE member at the end of its validity (at most
-- half the period; later if the newest member is later), so it counts from
-- before the grant until validity + period after it. Handle: that member,
-- which ends with the booking's id;
-- GIVE_BACK only while it is the newest member: it is logged again with
-- the used permits at the latest time they can have been (now, or the end
-- of the validity; not before the member below it).
-- State: zset {"<ms>:<total>:<permits>:<edge>" -> ms, at most one "~<from>:<to>" -> +inf}
-- slid-out members this script call may still delete (one budget for a batch call's decisions)
local sliding_log_purge = {left = 1000}
-- {ms, total, permits, edge, member} at rank; at the refund marker's rank: nil and the marker
local function sliding_log_entry(key, rank)
  local m = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
  if m[1] == nil then return nil end
  local total, n, edge = string.match(m[1], '^%d+:(%d+):(%d+):(%-?%d+):?%x*$')
  if not total then return nil, m[1] end
  return {m[2] + 0, total + 0, n + 0, edge + 0, m[1]}
end
local function sliding_log_member(ms, total, n, edge)
  return string.format('%d:%016d:%d:%d', ms, total, n, edge)
end
-- the live member whose sliding out leaves `room`: the one below the first that, as the oldest live one,
-- counts no more (the count from a member falls with its rank; binary search from the first live one).
-- Not where the totals reach what must go: permits taken back below a member count as long as it does
local function sliding_log_holding(key, room, newest, expired, back)
  local WRAP = 2000000000000000
  local lo, hi = expired + 1, redis.call('ZCARD', key) -- hi: none left, which leaves room
  if back then hi = hi - 1 end -- the marker, on top, is no call
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local e = sliding_log_entry(key, mid)
    -- the count from e as the oldest live member; the marker's range counts from its end
    local from_e = (newest[2] - e[2]) % WRAP + e[3]
    if back then
      local to = (newest[2] - back[2]) % WRAP
      if to < from_e and from_e <= (newest[2] - back[1]) % WRAP then from_e = to end
    end
    if from_e <= room then hi = mid else lo = mid + 1 end
  end
  return sliding_log_entry(key, lo - 1)
end
-- logs a call for ttl ms, or (ttl false) a refund marker into the key its live calls keep (their TTL stands);
-- old: the marker it replaces, or a stale one (the oldest live member is past it). One function, not two:
-- each local function here is a closure the script makes per call
local function sliding_log_add(key, at, m, ttl, old)
  redis.call('ZADD', key, at, m)
  if ttl then redis.call('PEXPIRE', key, ttl) end
  if old then redis.call('ZREM', key, old) end
end
return function(key, now_us, limit, period, _, permits, op, max_wait, _, commit, handle)
  local PEEK, REFUND, LEASE, GIVE_BACK = 1, 4, 5, 6
  local WRAP = 2000000000000000 -- totals modulo 2 x 10^15 (limit <= 10^15)
  local floor, max, min = math.floor, math.max, math.min
  local now = floor(now_us / 1000)
  local entry, member = sliding_log_entry, sliding_log_member

  local edge = now - period -- scored <= edge: slid out
  local newest, top = entry(key, -1)
  local back, below = nil, -2 -- the refund marker; the rank below the newest call
  if top then -- {from, to, member}
    local from, to = string.match(top, '^~(%d+):(%d+)$')
    back, below = {from + 0, to + 0, top}, -3
    newest = entry(key, -2)
  end

  -- live permits = newest total - the total just before the oldest live member's permits, or the
  -- marker's end while that total is in its range (the marker is active)
  local count, expired, active, stale = 0, 0, false, nil
  if newest then
    edge = max(edge, newest[4])
    expired = redis.call('ZCOUNT', key, '-inf', edge)
    local oldest = entry(key, expired)
    if oldest then count = (newest[2] - oldest[2] + oldest[3]) % WRAP end
    if back then
      local to = (newest[2] - back[2]) % WRAP
      if count <= to then
        stale = back[3]
      elseif count <= (newest[2] - back[1]) % WRAP then
        count, active = to, true
      end
    end
  end

  local purge = sliding_log_purge
  if op ~= PEEK and expired > 0 and purge.left > 0 then
    -- delete only what had slid out for good (at or before the stored edge), within the call's budget:
    -- when fewer have slid out at all, by score in one call
    local gone
    if expired <= purge.left then
      gone = redis.call('ZREMRANGEBYSCORE', key, '-inf', newest[4])
    else
      gone = min(redis.call('ZCOUNT', key, '-inf', newest[4]), purge.left)
      if gone > 0 then redis.call('ZREMRANGEBYRANK', key, 0, gone - 1) end
    end
    purge.left = purge.left - gone
    expired = expired - gone
  end

  if op == GIVE_BACK then
    -- a refund that took permits of the booking's member (the marker ends above the call below it) leaves
    -- its unused permits counted: giving them back would move the totals below the marker's end
    if not (newest and newest[5] == handle and permits <= newest[3] and now < newest[1] + period)
        or (back and (newest[2] - back[2]) % WRAP < newest[3]) then
      return {1, limit, max(0, limit - count), -1, count > 0 and newest[1] + period - now or 0, 0, 0, 0}
    end
    local used, below = newest[3] - permits, entry(key, below)
    local at, total = min(now, newest[1]), used
    if below then
      at = max(at, below[1])
      total = below[2] + used
      if at ~= below[1] and total >= WRAP then total = total - WRAP end
    end
    count = count - permits
    local reset_after = 0
    if used > 0 then reset_after = at + period - now elseif count > 0 then reset_after = below[1] + period - now end
    return {1, limit, max(0, limit - count), -1, reset_after, 0, permits, 0}, {function()
      redis.call('ZREM', key, newest[5])
      if back and not below and used == 0 then redis.call('ZREM', key, back[3]) end -- no call left: no log
      if used > 0 then sliding_log_add(key, at, member(at, total, used, newest[4]), at + period - now) end
    end}
  end
  if op == REFUND then
    -- the oldest live permits go: the log cannot tell whose permits are unused, and moving an admission
    -- later only counts it longer (removing the newest moved others' admissions earlier: over-admission).
    -- The marker's range grows by them (or starts at the oldest live member's first permit when it is
    -- not active), so the count after is what the next call reads: no call is read or rewritten
    local left = min(permits, count)
    count = count - left
    local reset_after = 0 -- when the newest permit left slides out
    if count > 0 then reset_after = newest[1] + period - now end
    local r = {1, limit, max(0, limit - count), -1, reset_after, 0, permits, 0}
    if left == 0 then return r end
    local from = active and back[1] or (newest[2] - count - left) % WRAP
    local m, old = string.format('~%d:%d', from, (newest[2] - count) % WRAP), back and back[3]
    if commit then sliding_log_add(key, '+inf', m, false, old) return r end
    return r, {sliding_log_add, key, '+inf', m, false, old}
  end

  if count + permits > limit then
    -- wait until the oldest live permits the request needs have slid out
    return {0, limit, max(0, limit - count),
            sliding_log_holding(key, limit - permits, newest, expired, back)[1] + period - now,
            newest[1] + period - now, 0, 0, 0}
  end
  if op == PEEK then
    local reset_after = 0
    if count > 0 then reset_after = newest[1] + period - now end
    return {1, limit, limit - count, -1, reset_after, 0, permits, 0}
  end

  local at, total = now, permits
  local valid = 0
  if op == LEASE then
    valid = min(max_wait, floor(period / 2))
    at = now + valid
  end
  if newest then
    at = max(at, newest[1])
    total = newest[2] + permits
    -- wrap only between ms, so that within one ms members sort by total
    if at ~= newest[1] and total >= WRAP then total = total - WRAP end
  end
  local m = member(at, total, permits, edge)
  if op == LEASE then m = m .. ':' .. handle end -- the booking's id: a member like it after a reset is not it
  local r = {1, limit, limit - count - permits, -1, at + period - now, valid, op == LEASE and m or permits, 0}
  if commit then sliding_log_add(key, at, m, at + period - now, stale) return r end
  return r, {sliding_log_add, key, at, m, at + period - now, stale}
end
