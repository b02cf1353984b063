-- leaky_bucket: a funnel, atomic. A bucket of `capacity` (= limit)
-- permits drains continuously and empties from full in `period` ms. A call
-- pours `permits` in; it is admitted if they fit. Water is kept scaled by
-- the period (1 permit = period units, leaks capacity units/ms): exact; the
-- period is stored beside it, and a rate change converts the water to the
-- new period (the permits in the bucket are kept, rounded up).
-- A new bucket is empty, or holds capacity - `initial` permits.
-- RESERVE treats the bucket as a FIFO queue: the call is booked behind the
-- water already in it and told how long until that has drained (smooth
-- outflow, no retry storm); it is refused if the queue is full or the wait
-- would exceed max_wait_ms. REFUND takes permits back out of the bucket.
-- LEASE pours the block in now and holds it until its validity ends (at
-- most half the period): until then the water drains only down to the
-- block, which is the bucket with the block poured at the end of the
-- validity; the hold is absolute time and permits, so a caller under any
-- later spec counts only what drained, at its own rate. Holds of blocks
-- booked while one is out add up and last until the latest ends. The
-- booking's id is stored as `bk`, which every other write drops.
-- Handle "<now>:<water>:<block>:<id>"; GIVE_BACK only while that booking
-- is on top (its id is the state's) and the period is the same: the
-- unused permits come out of the water as of the grant and leave the hold,
-- the used ones stay held until now at the latest (until the hold ends
-- while blocks booked before it are held); nothing drains in the give-back
-- (its spec may be older than the stored one), the next caller drains it
-- at its own rate.
-- State: hash {water = permits * period, ts = last update (ms), period
-- [, bk = "<booking's id>:<hold's end ms>:<permits held>"]}: the id only
-- until the next write, the hold while it lasts
return function(key, now_us, capacity, period, _, permits, op, max_wait, initial, commit, handle,
                bucket_booking)
  local PEEK, RESERVE, REFUND, LEASE, GIVE_BACK = 1, 2, 4, 5, 6
  local ceil, floor, max, min = math.ceil, math.floor, math.max, math.min
  local now, full = floor(now_us / 1000), capacity * period

  local state = redis.call('HMGET', key, 'water', 'ts', 'period', 'bk')
  local block = op == GIVE_BACK and bucket_booking(handle, state, tonumber(state[3]) == period, permits)
  if block then
    -- read below as written so: the unused permits out at the grant, out of the hold; the used ones held
    -- until now at the latest (until the hold ends while blocks booked before it are held)
    local ends, held = string.match(state[4], ':(%d+):(%d+)$')
    if held - block == 0 and now < ends + 0 then ends = now end
    state[1], state[4] = state[1] - permits * period, ':' .. ends .. ':' .. (held - permits)
  end
  local water, ts, stored_period = tonumber(state[1]), tonumber(state[2]), tonumber(state[3])
  local starts_short = false -- a new entity with less than full room
  -- blocks leased out: the water drains no lower than `held` permits until `held_until`
  local bottom, held_until, held, hold_left, kept = 0, 0, 0, 0, nil
  if not water or not ts then
    water, ts = 0, now
    if initial >= 0 and initial < capacity then water, starts_short = (capacity - initial) * period, true end
  else
    if stored_period and stored_period ~= period then
      water = ceil(water * period / stored_period)
    end
    if state[4] then
      held_until, held = string.match(state[4], ':(%d+):(%d+)$')
      held_until, held = tonumber(held_until) or 0, tonumber(held) or 0
      if held == 0 then held_until = 0 end
      if held_until > now then
        bottom, hold_left = held * period, held_until - now + ceil(held * period / capacity)
        kept = ':' .. held_until .. ':' .. held -- what a write keeps of it
      elseif held_until > ts then
        -- the hold ended since the last write: the drain until then stopped at the block
        if water > held * period and held_until - ts < ceil((water - held * period) / capacity) then
          water = water - (held_until - ts) * capacity
        else
          water = held * period
        end
        ts = held_until
      end
    end
    if now > ts then
      if now - ts >= ceil((water - bottom) / capacity) then
        water = bottom
      else
        water = water - (now - ts) * capacity
      end
      ts = now
    elseif ts > now then
      -- booked ahead by a lease of an older version: the water now is the one that drains to it by ts
      water, ts = water + (ts - now) * capacity, now
    end
  end
  if water < bottom then water = bottom end

  -- max(hold_left, ceil(water / capacity)) is the ms until empty
  -- it drains from its first call on, admitted or not
  if starts_short and op ~= PEEK and op ~= GIVE_BACK then
    bucket_store(key, 'water', water, ts, period, max(0, ceil(water / capacity)))
  end

  local reset_after
  if op == GIVE_BACK then
    reset_after = max(hold_left, ceil(water / capacity))
    local r = {1, capacity, max(0, floor((full - water) / period)), -1, reset_after, 0, block and permits or 0, 0}
    if not block then return r end
    return r, {bucket_store, key, 'water', state[1], state[2], period, reset_after, state[4]}
  end
  if op == REFUND then
    water = max(bottom, water - permits * period)
    reset_after = max(hold_left, ceil(water / capacity))
    local r = {1, capacity, max(0, floor((full - water) / period)), -1, reset_after, 0, permits, 0}
    if commit then bucket_store(key, 'water', water, ts, period, reset_after, kept, state[4]) return r end
    return r, {bucket_store, key, 'water', water, ts, period, reset_after, kept, state[4]}
  end
  local pour = permits * period
  local overflow = max(0, ceil((water + pour - full) / capacity))
  if bottom + pour > full then
    -- more than the hold leaves room for: not before it ends
    overflow = held_until - now
      + max(0, ceil((max(bottom, water - (held_until - now) * capacity) + pour - full) / capacity))
  end
  local wait = 0
  if op == RESERVE then wait = max(hold_left, ceil(water / capacity)) end
  if overflow > 0 or wait > max_wait then
    local retry = overflow
    if op == RESERVE then retry = max(overflow, wait - max_wait) end
    return {0, capacity, max(0, floor((full - water) / period)), retry, max(hold_left, ceil(water / capacity)), 0, 0,
            0}
  end
  if op == PEEK then
    return {1, capacity, max(0, floor((full - water) / period)), -1, max(hold_left, ceil(water / capacity)), 0,
            permits, 0}
  end
  if op == LEASE then
    local valid = min(max_wait, floor(period / 2))
    water = water + pour
    if held_until <= now then held = 0 end
    held, held_until = held + permits, max(held_until, now + valid)
    reset_after = max(held_until - now + ceil(held * period / capacity), ceil(water / capacity))
    local handle_out = string.format('%d:%d:%d:%s', now, water, permits, handle)
    return {1, capacity, max(0, floor((full - water) / period)), -1, reset_after, valid, handle_out, 0},
      {bucket_store, key, 'water', water, now, period, reset_after, handle .. ':' .. held_until .. ':' .. held}
  end
  water = water + pour
  reset_after = max(hold_left, ceil(water / capacity))
  local r = {1, capacity, max(0, floor((full - water) / period)), -1, reset_after, wait, permits, 0}
  if commit then bucket_store(key, 'water', water, ts, period, reset_after, kept, state[4]) return r end
  return r, {bucket_store, key, 'water', water, ts, period, reset_after, kept, state[4]}
end
