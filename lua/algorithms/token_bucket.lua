-- token_bucket: holds up to `burst` tokens, refilled continuously with
-- `limit` tokens per `period` ms, starts full (seed 004) or with
-- `initial` tokens (Bucket4j's initial tokens). Levels are kept scaled by
-- the period (1 token = period units, refill = limit units/ms) so all
-- arithmetic is exact integers; the period is stored beside them, and a
-- rate change converts the level to the new period: the tokens are kept
-- (rounded down, at most the new burst) and refill at the new rate.
-- RESERVE may take the bucket below zero (a debt the next callers wait
-- out), bounded by max_wait_ms. REFUND adds tokens back, up to the burst.
-- State: hash {level = tokens * period, ts = last update (ms), period}
ALG.token_bucket = function(key, now_us, r, permits, op, max_wait, initial)
  local now, limit, period, burst = math.floor(now_us / 1000), r.limit, r.period, r.burst
  local full = burst * period

  local state = redis.call('HMGET', key, 'level', 'ts', 'period')
  local level, ts, stored_period = tonumber(state[1]), tonumber(state[2]), tonumber(state[3])
  local starts_short = false -- a new entity with fewer than full tokens
  if not level or not ts then
    level, ts = full, now
    if initial >= 0 and initial < burst then level, starts_short = initial * period, true end
  else
    if stored_period and stored_period ~= period then
      level = math.min(full, math.floor(level * period / stored_period))
    end
    if now > ts then
      -- compare times, not products, so a long idle gap cannot overflow
      if level >= full or now - ts >= math.ceil((full - level) / limit) then
        level = math.max(level, full)
      else
        level = level + (now - ts) * limit
      end
      ts = now
    end
  end
  level = math.min(level, full)

  -- helpers inlined (a closure made per call costs time): max(0, ceil(units / limit))
  -- is the ms until `units` more have been refilled
  local ceil, floor, max = math.ceil, math.floor, math.max
  local function write()
    local reset_after = max(0, ceil((full - level) / limit))
    if reset_after == 0 then return redis.call('DEL', key) end
    redis.call('HSET', key, 'level', level, 'ts', ts, 'period', period)
    redis.call('PEXPIRE', key, reset_after)
  end
  -- it refills from its first call on, admitted or not
  if starts_short and op ~= PEEK then write() end

  if op == REFUND then
    level = math.min(full, level + permits * period)
    return {1, burst, max(0, floor(level / period)), -1, max(0, ceil((full - level) / limit)), 0}, write
  end
  local need = permits * period
  local wait = max(0, ceil((need - level) / limit))
  if wait > 0 then
    if op ~= RESERVE or wait > max_wait then
      local retry = wait
      if op == RESERVE then retry = wait - max_wait end
      return {0, burst, max(0, floor(level / period)), retry, max(0, ceil((full - level) / limit)), 0}
    end
  end
  if op == PEEK then
    return {1, burst, max(0, floor(level / period)), -1, max(0, ceil((full - level) / limit)), 0}
  end
  level = level - need
  return {1, burst, max(0, floor(level / period)), -1, max(0, ceil((full - level) / limit)), wait}, write
end
