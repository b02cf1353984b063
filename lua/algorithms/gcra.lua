-- gcra: generic cell rate algorithm, as redis-cell and go-redis redis_rate.
-- `limit` per `period` ms, up to `burst` at once. State is the theoretical
-- arrival time (TAT) in microseconds; the emission interval is rounded up to
-- a whole microsecond so rounding can only make the limiter stricter.
-- A new entity starts full, or with `initial` permits available; then its
-- state is kept from its first acquire on, admitted or not, so it fills.
-- The emission interval is stored beside the TAT, and a rate change
-- converts the time booked ahead of now to the new interval: the permits in
-- use are kept (rounded up), as in the other buckets.
-- RESERVE books the slot even when it lies in the future (up to max_wait_ms)
-- and returns the wait. REFUND moves the TAT back, never before now.
-- LEASE books the block behind the end of its validity (at most half the
-- tolerance): TAT = max(TAT, now + validity) + block * interval, if an
-- acquire of the block passes now. The state then carries the booking's id,
-- which every other write drops. Handle "<TAT written>:<block>:<id>";
-- GIVE_BACK only while that booking is on top (its id: a TAT alone can
-- recur, a reset and an acquire of the block in the right us rebuild it):
-- the unused permits come off it.
-- State: string "<TAT us>:<interval us>[:<booking id>]"
local function gcra_store(key, t, now, interval, booking)
  if t <= now then return redis.call('DEL', key) end
  local value = booking and string.format('%d:%d:%s', t, interval, booking) or string.format('%d:%d', t, interval)
  redis.call('SET', key, value, 'PX', math.ceil((t - now) / 1000))
end
return function(key, now, limit, period, burst, permits, op, max_wait, initial, commit, handle)
  local PEEK, RESERVE, REFUND, LEASE, GIVE_BACK = 1, 2, 4, 5, 6
  local ceil, floor, max, min = math.ceil, math.floor, math.max, math.min
  max_wait = max_wait * 1000
  local interval = ceil(period * 1000 / limit)
  local tolerance = interval * burst
  local stored = redis.call('GET', key)
  local tat, stored_interval, booked
  if stored then
    local t, i, id = string.match(stored, '^(%d+):(%d+):?(%x*)$')
    if t then tat, stored_interval, booked = t + 0, i + 0, id end
  end
  if tat and stored_interval ~= interval and tat > now then
    local booked = tat - now
    if booked * interval < 9007199254740992 then -- 2^53: the product is exact, so is the rounding up
      tat = now + ceil(booked * interval / stored_interval)
    else
      tat = now + ceil(booked / stored_interval * interval) -- within 1 us
    end
  end
  if not tat then
    tat = now
    -- a new entity with fewer than burst available: its debt runs from its first call on, admitted or not
    if initial >= 0 and initial < burst then
      tat = now + (burst - initial) * interval
      if op ~= PEEK and op ~= GIVE_BACK then gcra_store(key, tat, now, interval) end
    end
  elseif tat < now then
    tat = now
  end

  local t -- the TAT a write stores
  if op == GIVE_BACK then
    -- the unused permits come off the top; the used ones are not re-timed (stricter, and one rule less)
    local h_tat, h_block, h_id = string.match(handle, '^(%d+):(%d+):(%x+)$')
    local on_top = h_id and booked == h_id and tonumber(string.match(stored, '^%d+')) == tonumber(h_tat)
      and stored_interval == interval and permits <= tonumber(h_block)
    t = tat
    if on_top then t = max(now, tat - permits * interval) end
    local r = {1, burst, max(0, floor((now - (t - tolerance)) / interval)), -1, max(0, ceil((t - now) / 1000)), 0,
               on_top and permits or 0, 0}
    if not on_top then return r end
    return r, {gcra_store, key, t, now, interval}
  end
  if op == REFUND then
    t = max(now, tat - permits * interval)
    local r = {1, burst, max(0, floor((now - (t - tolerance)) / interval)), -1, ceil((t - now) / 1000), 0, permits, 0}
    if commit then gcra_store(key, t, now, interval) return r end
    return r, {gcra_store, key, t, now, interval}
  end
  t = tat + interval * permits
  local diff = now - (t - tolerance)
  local wait = 0
  if diff < 0 then
    if op ~= RESERVE or -diff > max_wait then
      local retry = -diff
      if op == RESERVE then retry = -diff - max_wait end
      return {0, burst, max(0, floor((now - (tat - tolerance)) / interval)), ceil(retry / 1000),
              ceil((tat - now) / 1000), 0, 0, 0}
    end
    wait = ceil(-diff / 1000)
  end
  if op == PEEK then
    return {1, burst, max(0, floor((now - (tat - tolerance)) / interval)), -1, ceil((tat - now) / 1000), 0, permits, 0}
  end
  if op == LEASE then
    local valid = min(max_wait / 1000, floor(tolerance / 2000)) -- ms (max_wait is in us here)
    t = max(tat, now + valid * 1000) + interval * permits
    return {1, burst, max(0, floor((now - (t - tolerance)) / interval)), -1, ceil((t - now) / 1000), valid,
            string.format('%d:%d:%s', t, permits, handle), 0}, {gcra_store, key, t, now, interval, handle}
  end
  local r = {1, burst, max(0, floor(diff / interval)), -1, ceil((t - now) / 1000), wait, permits, 0}
  if commit then gcra_store(key, t, now, interval) return r end
  return r, {gcra_store, key, t, now, interval}
end
