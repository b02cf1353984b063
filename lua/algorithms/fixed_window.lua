-- fixed_window: at most `limit` permits per window of `period` ms. A window
-- opens at the first permit taken after the previous one closed (a counter's
-- INCR + EXPIRE, with the start stored so explicit clocks work too).
-- State: hash {start = window start (ms), count = permits taken[, period]}.
-- The TTL is the window's end. Under the server's clock, a write that finds
-- `period` equal to its own sets the count alone: the write that stored it
-- set that TTL. The write that opens a window on no key stores no period
-- (a window may see one call only); the next one stores it with the TTL.
-- A rate change keeps the count and the window's start; the window then
-- ends at start + the new period.
-- LEASE: the block is counted in the window and valid no later than its
-- last ms (a block never outlives its window); the window keeps the latest
-- booking's id as `bk` (a window opened again in place drops it). Handle
-- "<start>:<count>:<id>"; GIVE_BACK takes the unused permits out of the
-- window that holds that id (not one that looks like it: a reset and a
-- window opened in the same ms), writing the count alone (never the period
-- or the TTL: the give-back's spec may be older than the window's).
local function fixed_window_store(key, start, count, window_left, period, fields, booking, stale_booking)
  if count == 0 then return redis.call('DEL', key) end
  if booking then redis.call('HSET', key, 'bk', booking) elseif stale_booking then redis.call('HDEL', key, 'bk') end
  if fields == 1 then return redis.call('HSET', key, 'count', count) end
  if fields == 2 then
    redis.call('HSET', key, 'start', start, 'count', count)
  else
    redis.call('HSET', key, 'start', start, 'count', count, 'period', period)
  end
  redis.call('PEXPIRE', key, window_left)
end
return function(key, now_us, limit, period, _, permits, op, max_wait, _, commit, handle)
  local PEEK, REFUND, LEASE, GIVE_BACK = 1, 4, 5, 6
  local floor, max = math.floor, math.max
  local now = floor(now_us / 1000)
  local state = redis.call('HMGET', key, 'start', 'count', 'period', 'bk')
  local start, count = tonumber(state[1]), tonumber(state[2])
  local fields = 3 -- to write: 1 the count, 2 start and count, 3 and the period
  if server_clock and tonumber(state[3]) == period then fields = 1 end
  local stale_booking = false -- a lease's id from a window now over
  if not start or not count or now >= start + period then
    start, count = now, 0
    fields = (state[1] or state[2] or state[3]) and 3 or 2
    stale_booking = state[4]
  end
  local window_left = start + period - now

  if op == GIVE_BACK then
    local h_start, h_id = string.match(handle, '^(%-?%d+):%-?%d+:(%x+)$')
    local on_top = tonumber(h_start) == start and h_id == state[4] and count >= permits
    if on_top then count = count - permits end
    local r = {1, limit, max(0, limit - count), -1, count > 0 and window_left or 0, 0, on_top and permits or 0, 0}
    if not on_top then return r end
    -- the count alone: a give-back under an older spec must not move the window's period or end
    if count == 0 then return r, {redis.call, 'DEL', key} end
    return r, {redis.call, 'HSET', key, 'count', count}
  end
  if op == REFUND then
    count = max(0, count - permits)
    local r = {1, limit, max(0, limit - count), -1, count > 0 and window_left or 0, 0, permits, 0}
    if commit then fixed_window_store(key, start, count, window_left, period, fields, nil, stale_booking) return r end
    return r, {fixed_window_store, key, start, count, window_left, period, fields, nil, stale_booking}
  end
  if count + permits > limit then
    return {0, limit, max(0, limit - count), window_left, window_left, 0, 0, 0}
  end
  if op == PEEK then
    return {1, limit, limit - count, -1, count > 0 and window_left or 0, 0, permits, 0}
  end
  count = count + permits
  if op == LEASE then
    return {1, limit, limit - count, -1, window_left, math.min(max_wait, window_left - 1),
            string.format('%d:%d:%s', start, count, handle), 0},
      {fixed_window_store, key, start, count, window_left, period, fields, handle}
  end
  local r = {1, limit, limit - count, -1, window_left, 0, permits, 0}
  if commit then fixed_window_store(key, start, count, window_left, period, fields, nil, stale_booking) return r end
  return r, {fixed_window_store, key, start, count, window_left, period, fields, nil, stale_booking}
end
