-- token_bucket: holds up to `burst` tokens, refilled continuously with
-- `limit` tokens per `period` ms, starts full or with
-- `initial` tokens (Bucket4j's initial tokens). Levels are kept scaled by
-- the period (1 token = period units, refill = limit units/ms) so all
-- arithmetic is exact integers; the period is stored beside them, and a
-- rate change converts the level to the new period: the tokens are kept
-- (rounded down, at most the new burst) and refill at the new rate.
-- RESERVE may take the bucket below zero (a debt the next callers wait
-- out), bounded by max_wait_ms. REFUND adds tokens back, up to the burst.
-- LEASE takes the block now and holds it until its validity ends (at
-- most half the time to refill the bucket): until then the level refills
-- only up to burst - held, which is the bucket with the block taken at the
-- end of the validity, so nobody spends what the block may still take; the
-- hold is absolute time and permits, so a caller under any later spec
-- counts only the refill that happened, at its own rate. Holds of blocks
-- booked while one is out add up and last until the latest ends. The
-- booking's id (the LEASE's last argument) is stored as `bk`, which every
-- other write drops. Handle "<now>:<level>:<block>:<id>"; GIVE_BACK only
-- while that booking is on top (its id is the state's: equal levels and
-- times prove nothing, a write in the same ms can store both) and the
-- period is the same: the unused permits go back into the level as of the
-- grant and leave the hold, the used ones stay held until now at the
-- latest (until the hold ends while blocks booked before it are held). The
-- give-back refills nothing: its spec may be older than the stored one
-- (a lease's is its grant's), and the next caller refills at its own.
-- State: hash {level = tokens * period, ts = last update (ms), period
-- [, bk = "<booking's id>:<hold's end ms>:<permits held>"]}: the id only
-- until the next write, the hold while it lasts
return function(key, now_us, limit, period, burst, permits, op, max_wait, initial, commit, handle,
                bucket_booking)
  local PEEK, RESERVE, REFUND, LEASE, GIVE_BACK = 1, 2, 4, 5, 6
  local ceil, floor, max, min = math.ceil, math.floor, math.max, math.min
  local now, full = floor(now_us / 1000), burst * period

  local state = redis.call('HMGET', key, 'level', 'ts', 'period', 'bk')
  local block = op == GIVE_BACK and bucket_booking(handle, state, tonumber(state[3]) == period, permits)
  if block then
    -- read below as written so: the unused permits back at the grant, out of the hold; the used ones held
    -- until now at the latest (until the hold ends while blocks booked before it are held)
    local ends, held = string.match(state[4], ':(%d+):(%d+)$')
    if held - block == 0 and now < ends + 0 then ends = now end
    state[1], state[4] = state[1] + permits * period, ':' .. ends .. ':' .. (held - permits)
  end
  local level, ts, stored_period = tonumber(state[1]), tonumber(state[2]), tonumber(state[3])
  local starts_short = false -- a new entity with fewer than full tokens
  -- blocks leased out: `held` permits kept out of the level until `held_until`
  local cap, held_until, held, hold_left, kept = full, 0, 0, 0, nil
  if not level or not ts then
    level, ts = full, now
    if initial >= 0 and initial < burst then level, starts_short = initial * period, true end
  else
    if stored_period and stored_period ~= period then
      level = min(full, floor(level * period / stored_period))
    end
    if state[4] then
      held_until, held = string.match(state[4], ':(%d+):(%d+)$')
      held_until, held = tonumber(held_until) or 0, tonumber(held) or 0
      if held == 0 then held_until = 0 end
      local held_cap = full - held * period
      if held_until > now then
        cap, hold_left = held_cap, held_until - now + ceil(held * period / limit)
        kept = ':' .. held_until .. ':' .. held -- what a write keeps of it
      elseif held_until > ts then
        -- the hold ended since the last write: the refill until then stopped at its cap
        if level < held_cap and held_until - ts < ceil((held_cap - level) / limit) then
          level = level + (held_until - ts) * limit
        else
          level = held_cap
        end
        ts = held_until
      end
    end
    if now > ts then
      -- compare times, not products, so a long idle gap cannot overflow
      if level >= cap or now - ts >= ceil((cap - level) / limit) then
        level = max(level, cap)
      else
        level = level + (now - ts) * limit
      end
      ts = now
    elseif ts > now then
      -- booked ahead by a lease of an older version: the level now is the one that refills to it by ts
      level, ts = level - (ts - now) * limit, now
    end
  end
  if level > cap then level = cap end

  -- max(hold_left, ceil((full - level) / limit)) is the ms until full again
  -- it refills from its first call on, admitted or not
  if starts_short and op ~= PEEK and op ~= GIVE_BACK then
    bucket_store(key, 'level', level, ts, period, ceil((full - level) / limit))
  end

  if op == GIVE_BACK then
    local reset_after = max(hold_left, ceil((full - level) / limit))
    local r = {1, burst, max(0, floor(level / period)), -1, reset_after, 0, block and permits or 0, 0}
    if not block then return r end
    return r, {bucket_store, key, 'level', state[1], state[2], period, reset_after, state[4]}
  end
  local reset_after
  if op == REFUND then
    level = min(cap, level + permits * period)
    reset_after = max(hold_left, ceil((full - level) / limit))
    local r = {1, burst, max(0, floor(level / period)), -1, reset_after, 0, permits, 0}
    if commit then bucket_store(key, 'level', level, ts, period, reset_after, kept, state[4]) return r end
    return r, {bucket_store, key, 'level', level, ts, period, reset_after, kept, state[4]}
  end
  local need = permits * period
  local wait = max(0, ceil((need - level) / limit))
  if need > cap then
    -- more than the hold leaves room for: not before it ends
    wait = held_until - now + max(0, ceil((need - min(cap, level + (held_until - now) * limit)) / limit))
  end
  if wait > 0 then
    if op ~= RESERVE or wait > max_wait then
      local retry = wait
      if op == RESERVE then retry = wait - max_wait end
      return {0, burst, max(0, floor(level / period)), retry, max(hold_left, ceil((full - level) / limit)), 0, 0, 0}
    end
  end
  if op == PEEK then
    return {1, burst, max(0, floor(level / period)), -1, max(hold_left, ceil((full - level) / limit)), 0, permits, 0}
  end
  if op == LEASE then
    local valid = min(max_wait, floor(full / (2 * limit)))
    level = level - need
    if held_until <= now then held = 0 end
    held, held_until = held + permits, max(held_until, now + valid)
    reset_after = max(held_until - now + ceil(held * period / limit), ceil((full - level) / limit))
    local handle_out = string.format('%d:%d:%d:%s', now, level, permits, handle)
    return {1, burst, max(0, floor(level / period)), -1, reset_after, valid, handle_out, 0},
      {bucket_store, key, 'level', level, now, period, reset_after, handle .. ':' .. held_until .. ':' .. held}
  end
  level = level - need
  reset_after = max(hold_left, ceil((full - level) / limit))
  local r = {1, burst, max(0, floor(level / period)), -1, reset_after, wait, permits, 0}
  if commit then bucket_store(key, 'level', level, ts, period, reset_after, kept, state[4]) return r end
  return r, {bucket_store, key, 'level', level, ts, period, reset_after, kept, state[4]}
end
