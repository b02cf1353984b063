-- sliding_window: the weighted two-window counter. Windows are aligned to
-- multiples of `period`; the estimate is prev * (period - elapsed) / period
-- + cur. Integer arithmetic scaled by period keeps it exact. O(1) memory.
-- State: hash {start = current window start (ms), cur, prev, period}.
-- The TTL is the next window's end: within a window under the same period
-- and the server's clock, a write sets the counts alone.
-- A rate change re-aligns the windows to the new period: the old estimate
-- (rounded up) counts as taken in the new current window.
-- LEASE: the block is counted in the current window and valid no later
-- than its last ms; the state keeps the latest booking's id as `bk` (a
-- change of period drops it). Handle "<window start>:<id>"; GIVE_BACK takes
-- the unused permits out of that window (cur, or prev once the next one
-- began) while the period is the same and the id is the state's (not a
-- window that looks like it after a reset).
local function sliding_window_store(key, start, cur, prev, period, ttl, ttl_set, booking, stale_booking)
  if cur == 0 and prev == 0 then return redis.call('DEL', key) end
  if booking then redis.call('HSET', key, 'bk', booking) elseif stale_booking then redis.call('HDEL', key, 'bk') end
  if ttl_set then return redis.call('HSET', key, 'cur', cur, 'prev', prev) end
  redis.call('HSET', key, 'start', start, 'cur', cur, 'prev', prev, 'period', period)
  redis.call('PEXPIRE', key, ttl)
end
-- start, cur, prev moved to the window holding now under period p
local function sliding_window_advance(now, p, start, cur, prev)
  local window = now - now % p
  if not start or window > start + p then
    cur, prev = 0, 0
  elseif window == start + p then
    prev, cur = cur, 0
  elseif window < start then
    window = start -- an explicit clock went back: stay in the stored window
  end
  return window, cur, prev
end
return function(key, now_us, limit, period, _, permits, op, max_wait, _, commit, handle)
  local PEEK, REFUND, LEASE, GIVE_BACK = 1, 4, 5, 6
  local floor, max = math.floor, math.max
  local now = floor(now_us / 1000)
  local state = redis.call('HMGET', key, 'start', 'cur', 'prev', 'period', 'bk')
  local start, cur, prev = tonumber(state[1]), tonumber(state[2]) or 0, tonumber(state[3]) or 0
  local stored_period = tonumber(state[4])
  local stored_start = start
  -- a lease's id outlives a change of period no more than the windows it was counted in
  local stale_booking = state[5] and stored_period ~= period
  if start and stored_period and stored_period ~= period then
    start, cur, prev = sliding_window_advance(now, stored_period, start, cur, prev)
    local left = stored_period - max(0, now - start)
    local estimate = math.ceil((prev * left + cur * stored_period) / stored_period)
    start, cur, prev = now - now % period, estimate, 0
  end
  start, cur, prev = sliding_window_advance(now, period, start, cur, prev)
  local ttl_set = server_clock and stored_start == start and stored_period == period
  local elapsed = max(0, now - start)
  local window_left = period - elapsed
  -- remaining = floor((limit * period - used) / period), used = estimate * period = prev * window_left + cur * period;
  -- reset_after: until cur, else prev, has slid out

  if op == GIVE_BACK then
    local h_start, h_id = string.match(handle, '^(%-?%d+):(%x+)$')
    h_start = tonumber(h_start)
    local given = 0
    if stored_period ~= period or not h_start or h_id ~= state[5] then
      given = nil
    elseif h_start == start then
      given = math.min(cur, permits)
      cur = cur - given
    elseif h_start + period == start then
      given = math.min(prev, permits)
      prev = prev - given
    else
      given = nil
    end
    local r = {1, limit, max(0, floor((limit * period - prev * window_left - cur * period) / period)), -1,
               cur > 0 and window_left + period or prev > 0 and window_left or 0, 0, given or 0, 0}
    if not given then return r end
    return r, {sliding_window_store, key, start, cur, prev, period, window_left + period, ttl_set}
  end
  if op == REFUND then
    local from_cur = math.min(cur, permits)
    cur = cur - from_cur
    prev = max(0, prev - (permits - from_cur))
    local r = {1, limit, max(0, floor((limit * period - prev * window_left - cur * period) / period)), -1,
               cur > 0 and window_left + period or prev > 0 and window_left or 0, 0, permits, 0}
    if commit then
      sliding_window_store(key, start, cur, prev, period, window_left + period, ttl_set, nil, stale_booking)
      return r
    end
    return r, {sliding_window_store, key, start, cur, prev, period, window_left + period, ttl_set, nil, stale_booking}
  end
  local used = prev * window_left + cur * period -- estimate * period
  if used + permits * period > limit * period then
    local retry
    local room = limit - cur - permits
    local need = period -- elapsed time in this window at which prev's weight fits
    if room >= 0 and prev > 0 then need = period - floor(room * period / prev) end
    if room >= 0 and need < period then
      retry = need - elapsed
    else
      -- next window: cur becomes prev and decays
      local next_need = 0
      if cur > 0 then next_need = max(0, period - floor((limit - permits) * period / cur)) end
      retry = window_left + next_need
    end
    return {0, limit, max(0, floor((limit * period - used) / period)), retry,
            cur > 0 and window_left + period or prev > 0 and window_left or 0, 0, 0, 0}
  end
  if op == PEEK then
    return {1, limit, max(0, floor((limit * period - used) / period)), -1,
            cur > 0 and window_left + period or prev > 0 and window_left or 0, 0, permits, 0}
  end
  cur = cur + permits
  used = used + permits * period
  if op == LEASE then
    return {1, limit, max(0, floor((limit * period - used) / period)), -1, window_left + period,
            math.min(max_wait, window_left - 1), string.format('%d:%s', start, handle), 0},
      {sliding_window_store, key, start, cur, prev, period, window_left + period, ttl_set, handle}
  end
  local r = {1, limit, max(0, floor((limit * period - used) / period)), -1, window_left + period, 0, permits, 0}
  if commit then
    sliding_window_store(key, start, cur, prev, period, window_left + period, ttl_set, nil, stale_booking)
    return r
  end
  return r, {sliding_window_store, key, start, cur, prev, period, window_left + period, ttl_set, nil, stale_booking}
end
