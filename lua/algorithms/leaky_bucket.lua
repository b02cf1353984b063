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
-- LEASE pours the block in as of the end of its validity (at most half the
-- period): the water is stored as of ts = now + validity, and a state whose
-- ts is ahead is read back to now (the water that drains to it by ts).
-- The booking's id is stored as `bk`, which every other write drops.
-- Handle "<ts>:<water>:<water before>:<now>:<block>:<id>"; GIVE_BACK only
-- while that booking is on top (its id is the state's): the used permits
-- count as poured at the latest time they can have been (now, or the end
-- of the validity). `bk` is "<id>:<capacity>:<grant ms>:<water after the
-- block at the grant>": a caller under another rate (capacity or period)
-- reads the booking back as the block poured at its grant and drains from
-- there at its own rate, so the validity's drain credited at the grant's
-- rate never reaches it; a give-back under another rate gives nothing back.
-- State: hash {water = permits * period, ts = last update (ms), period[, bk]}
return function(key, now_us, capacity, period, _, permits, op, max_wait, initial, commit, handle,
                bucket_booking)
  local PEEK, RESERVE, REFUND, LEASE, GIVE_BACK = 1, 2, 4, 5, 6
  local ceil, floor, max, min = math.ceil, math.floor, math.max, math.min
  local now, full = floor(now_us / 1000), capacity * period

  local state = redis.call('HMGET', key, 'water', 'ts', 'period', 'bk')
  local water, ts, stored_period = tonumber(state[1]), tonumber(state[2]), tonumber(state[3])
  local same_rate = stored_period == period -- as the booking on top (if any) was made
  local starts_short = false -- a new entity with less than full room
  if not water or not ts then
    water, ts = 0, now
    if initial >= 0 and initial < capacity then water, starts_short = (capacity - initial) * period, true end
  else
    if state[4] then
      local rate, g, poured = string.match(state[4], ':(%d+):(%-?%d+):(%-?%d+)$')
      if rate and (rate + 0 ~= capacity or not same_rate) then
        water, ts, same_rate = poured + 0, g + 0, false
      end
    end
    if stored_period and stored_period ~= period then
      water = ceil(water * period / stored_period)
    end
    if now > ts then
      if now - ts >= ceil(water / capacity) then
        water = 0
      else
        water = water - (now - ts) * capacity
      end
      ts = now
    elseif ts > now then
      -- booked ahead by a lease: the water now is the one that drains to it by ts
      water, ts = water + (ts - now) * capacity, now
    end
  end

  -- max(0, ceil(units / capacity)) is the ms until `units` have leaked out
  -- it drains from its first call on, admitted or not
  if starts_short and op ~= PEEK and op ~= GIVE_BACK then
    bucket_store(key, 'water', water, ts, period, max(0, ceil(water / capacity)))
  end

  local reset_after
  if op == GIVE_BACK then
    local at, g, before, used = bucket_booking(handle, state, same_rate, permits, now)
    if at then -- the used permits as poured at `at`, then the drain until now
      water = max(0, max(0, before - (at - g) * capacity) + used * period - (now - at) * capacity)
    end
    reset_after = max(0, ceil(water / capacity))
    local r = {1, capacity, max(0, floor((full - water) / period)), -1, reset_after, 0, at and permits or 0, 0}
    if not at then return r end
    return r, {bucket_store, key, 'water', water, ts, period, reset_after, nil, state[4]}
  end
  if op == REFUND then
    water = max(0, water - permits * period)
    reset_after = max(0, ceil(water / capacity))
    local r = {1, capacity, max(0, floor((full - water) / period)), -1, reset_after, 0, permits, 0}
    if commit then bucket_store(key, 'water', water, ts, period, reset_after, nil, state[4]) return r end
    return r, {bucket_store, key, 'water', water, ts, period, reset_after, nil, state[4]}
  end
  local pour = permits * period
  local overflow = max(0, ceil((water + pour - full) / capacity))
  local wait = 0
  if op == RESERVE then wait = max(0, ceil(water / capacity)) end
  if overflow > 0 or wait > max_wait then
    local retry = overflow
    if op == RESERVE then retry = max(overflow, wait - max_wait) end
    return {0, capacity, max(0, floor((full - water) / period)), retry, max(0, ceil(water / capacity)), 0, 0, 0}
  end
  if op == PEEK then
    return {1, capacity, max(0, floor((full - water) / period)), -1, max(0, ceil(water / capacity)), 0, permits, 0}
  end
  if op == LEASE then
    local valid = min(max_wait, floor(period / 2))
    local before = water
    water = max(0, water - valid * capacity) + pour
    local handle_out = string.format('%d:%d:%d:%d:%d:%s', now + valid, water, before, now, permits, handle)
    local booking = string.format('%s:%d:%d:%d', handle, capacity, now, before + pour)
    reset_after = valid + ceil(water / capacity)
    return {1, capacity, max(0, floor((full - water - valid * capacity) / period)), -1, reset_after, valid,
            handle_out, 0},
      {bucket_store, key, 'water', water, now + valid, period, reset_after, booking}
  end
  water = water + pour
  reset_after = max(0, ceil(water / capacity))
  local r = {1, capacity, max(0, floor((full - water) / period)), -1, reset_after, wait, permits, 0}
  if commit then bucket_store(key, 'water', water, ts, period, reset_after, nil, state[4]) return r end
  return r, {bucket_store, key, 'water', water, ts, period, reset_after, nil, state[4]}
end
