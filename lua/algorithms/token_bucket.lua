-- token_bucket: holds up to `burst` tokens, refilled continuously with
-- `limit` tokens per `period` ms, starts full or with
-- `initial` tokens (Bucket4j's initial tokens). Levels are kept scaled by
-- the period (1 token = period units, refill = limit units/ms) so all
-- arithmetic is exact integers; the period is stored beside them, and a
-- rate change converts the level to the new period: the tokens are kept
-- (rounded down, at most the new burst) and refill at the new rate.
-- RESERVE may take the bucket below zero (a debt the next callers wait
-- out), bounded by max_wait_ms. REFUND adds tokens back, up to the burst.
-- LEASE books the block as taken at the end of its validity (at most half
-- the time to refill the bucket): the level is stored as of ts = now +
-- validity, and a state whose ts is ahead is read back to now (the level
-- that refills to it by ts), so nobody spends what the block may still
-- take. The booking's id (the LEASE's last argument) is stored as `bk`,
-- which every other write drops. Handle "<ts>:<level>:<level before>:<now>:
-- <block>:<id>"; GIVE_BACK only while that booking is on top (its id is
-- the state's: equal levels and times prove nothing, a write in the same ms
-- can store both): the used permits count as taken at the latest time they
-- can have been (now, or the end of the validity). `bk` is
-- "<id>:<limit>:<grant ms>:<level after the block at the grant>": a caller
-- under another rate (limit or period) reads the booking back as the block
-- taken at its grant and refills from there at its own rate, so the
-- validity's refill credited at the grant's rate never reaches it; a
-- give-back under another rate gives nothing back.
-- State: hash {level = tokens * period, ts = last update (ms), period[, bk]}
return function(key, now_us, limit, period, burst, permits, op, max_wait, initial, commit, handle,
                bucket_booking)
  local PEEK, RESERVE, REFUND, LEASE, GIVE_BACK = 1, 2, 4, 5, 6
  local ceil, floor, max, min = math.ceil, math.floor, math.max, math.min
  local now, full = floor(now_us / 1000), burst * period

  local state = redis.call('HMGET', key, 'level', 'ts', 'period', 'bk')
  local level, ts, stored_period = tonumber(state[1]), tonumber(state[2]), tonumber(state[3])
  local same_rate = stored_period == period -- as the booking on top (if any) was made
  local starts_short = false -- a new entity with fewer than full tokens
  if not level or not ts then
    level, ts = full, now
    if initial >= 0 and initial < burst then level, starts_short = initial * period, true end
  else
    if state[4] then
      local rate, g, taken = string.match(state[4], ':(%d+):(%-?%d+):(%-?%d+)$')
      if rate and (rate + 0 ~= limit or not same_rate) then
        level, ts, same_rate = taken + 0, g + 0, false
      end
    end
    if stored_period and stored_period ~= period then
      level = min(full, floor(level * period / stored_period))
    end
    if now > ts then
      -- compare times, not products, so a long idle gap cannot overflow
      if level >= full or now - ts >= ceil((full - level) / limit) then
        level = max(level, full)
      else
        level = level + (now - ts) * limit
      end
      ts = now
    elseif ts > now then
      -- booked ahead by a lease: the level now is the one that refills to it by ts
      level, ts = level - (ts - now) * limit, now
    end
  end
  if level > full then level = full end

  -- max(0, ceil(units / limit)) is the ms until `units` more have been refilled
  -- it refills from its first call on, admitted or not
  if starts_short and op ~= PEEK and op ~= GIVE_BACK then
    bucket_store(key, 'level', level, ts, period, ceil((full - level) / limit))
  end

  if op == GIVE_BACK then
    local at, g, before, used = bucket_booking(handle, state, same_rate, permits, now)
    if at then -- the used permits as taken at `at`, then the refill until now
      level = min(full, min(full, before + (at - g) * limit) - used * period + (now - at) * limit)
    end
    local reset_after = max(0, ceil((full - level) / limit))
    local r = {1, burst, max(0, floor(level / period)), -1, reset_after, 0, at and permits or 0, 0}
    if not at then return r end
    return r, {bucket_store, key, 'level', level, ts, period, reset_after, nil, state[4]}
  end
  local reset_after
  if op == REFUND then
    level = min(full, level + permits * period)
    reset_after = max(0, ceil((full - level) / limit))
    local r = {1, burst, max(0, floor(level / period)), -1, reset_after, 0, permits, 0}
    if commit then bucket_store(key, 'level', level, ts, period, reset_after, nil, state[4]) return r end
    return r, {bucket_store, key, 'level', level, ts, period, reset_after, nil, state[4]}
  end
  local need = permits * period
  local wait = max(0, ceil((need - level) / limit))
  if wait > 0 then
    if op ~= RESERVE or wait > max_wait then
      local retry = wait
      if op == RESERVE then retry = wait - max_wait end
      return {0, burst, max(0, floor(level / period)), retry, max(0, ceil((full - level) / limit)), 0, 0, 0}
    end
  end
  if op == PEEK then
    return {1, burst, max(0, floor(level / period)), -1, max(0, ceil((full - level) / limit)), 0, permits, 0}
  end
  if op == LEASE then
    local valid = min(max_wait, floor(full / (2 * limit)))
    local before = level
    level = min(full, level + valid * limit) - need
    local handle_out = string.format('%d:%d:%d:%d:%d:%s', now + valid, level, before, now, permits, handle)
    local booking = string.format('%s:%d:%d:%d', handle, limit, now, before - need)
    reset_after = valid + ceil((full - level) / limit)
    return {1, burst, max(0, floor((level - valid * limit) / period)), -1, reset_after, valid, handle_out, 0},
      {bucket_store, key, 'level', level, now + valid, period, reset_after, booking}
  end
  level = level - need
  reset_after = max(0, ceil((full - level) / limit))
  local r = {1, burst, max(0, floor(level / period)), -1, reset_after, wait, permits, 0}
  if commit then bucket_store(key, 'level', level, ts, period, reset_after, nil, state[4]) return r end
  return r, {bucket_store, key, 'level', level, ts, period, reset_after, nil, state[4]}
end
