-- sliding_window: the weighted two-window counter. Windows are aligned to
-- multiples of `period`; the estimate is prev * (period - elapsed) / period
-- + cur. Integer arithmetic scaled by period keeps it exact. O(1) memory.
-- State: hash {start = current window start (ms), cur, prev, period}.
-- A rate change re-aligns the windows to the new period: the old estimate
-- (rounded up) counts as taken in the new current window.
-- LEASE: the block is counted in the current window and valid no later
-- than its last ms. Handle "<window start>"; GIVE_BACK takes the unused
-- permits out of that window (cur, or prev once the next one began) while
-- the period is the same.
ALG.sliding_window = function(key, now_us, r, permits, op, max_wait, _, handle)
  local now, limit, period = math.floor(now_us / 1000), r.limit, r.period
  local state = redis.call('HMGET', key, 'start', 'cur', 'prev', 'period')
  local start, cur, prev = tonumber(state[1]), tonumber(state[2]) or 0, tonumber(state[3]) or 0

  -- moves start/cur/prev to the window holding now under period p
  local function advance(p)
    local window = now - now % p
    if not start or window > start + p then
      cur, prev = 0, 0
    elseif window == start + p then
      prev, cur = cur, 0
    elseif window < start then
      window = start -- an explicit clock went back: stay in the stored window
    end
    start = window
  end

  local stored_period = tonumber(state[4])
  if start and stored_period and stored_period ~= period then
    advance(stored_period)
    local left = stored_period - math.max(0, now - start)
    local estimate = math.ceil((prev * left + cur * stored_period) / stored_period)
    start, cur, prev = now - now % period, estimate, 0
  end
  advance(period)
  local elapsed = math.max(0, now - start)
  local window_left = period - elapsed
  local function used() return prev * window_left + cur * period end -- estimate * period
  local function remaining() return math.max(0, math.floor((limit * period - used()) / period)) end
  local function reset_after()
    if cur > 0 then return window_left + period end
    if prev > 0 then return window_left end
    return 0
  end
  local function write()
    if cur == 0 and prev == 0 then return redis.call('DEL', key) end
    redis.call('HSET', key, 'start', start, 'cur', cur, 'prev', prev, 'period', period)
    redis.call('PEXPIRE', key, window_left + period)
  end

  if op == GIVE_BACK then
    local h_start = tonumber(string.match(handle, '^%-?%d+$'))
    if stored_period ~= period or not h_start then
      return {1, limit, remaining(), -1, reset_after(), 0, 0}
    end
    local given = 0
    if h_start == start then
      given = math.min(cur, permits)
      cur = cur - given
    elseif h_start + period == start then
      given = math.min(prev, permits)
      prev = prev - given
    else
      return {1, limit, remaining(), -1, reset_after(), 0, 0}
    end
    return {1, limit, remaining(), -1, reset_after(), 0, given}, write
  end
  if op == REFUND then
    local from_cur = math.min(cur, permits)
    cur = cur - from_cur
    prev = math.max(0, prev - (permits - from_cur))
    return {1, limit, remaining(), -1, reset_after(), 0}, write
  end
  if used() + permits * period > limit * period then
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
    return {0, limit, remaining(), retry, reset_after(), 0}
  end
  if op == PEEK then
    return {1, limit, remaining(), -1, reset_after(), 0}
  end
  cur = cur + permits
  if op == LEASE then
    return {1, limit, remaining(), -1, reset_after(), math.min(max_wait, window_left - 1), string.format('%d', start)},
      write
  end
  return {1, limit, remaining(), -1, reset_after(), 0}, write
end
