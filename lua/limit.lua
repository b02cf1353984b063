-- limit: every rate-limiting decision, for every algorithm (the functions
-- in lua/algorithms/, included at build time). An entity may be held to
-- several rates at once ("10/second" and "1000/hour"): each rate has its own
-- key, all in the entity's hash slot, and a call is admitted only if every
-- rate admits it; then all consume, else none does.
-- KEYS[i]  the state of rate i
-- ARGV     now_ms (0 = Redis TIME), algorithm, op, permits, max_wait_ms,
--          initial tokens (-1: a new entity starts full), then
--          limit, period_ms, burst for each rate
-- op       0 acquire, 1 peek (writes nothing), 2 reserve (book a slot up
--          to max_wait_ms away), 3 acquire up to `permits` (as many as all
--          rates allow, at least 1), 4 refund (give `permits` back),
--          5 lease (a block of up to `permits`, valid up to max_wait_ms),
--          6 give back (`permits` unused of a lease; ARGV after the rate
--          triples: the lease's handles in rate order)
-- reply    {allowed, limit, remaining, retry_after_ms, reset_after_ms,
--          wait_ms, granted, rate_index}: the rate that binds reports
--          limit and remaining (the smallest remaining; when denied, the
--          denial with the longest retry_after_ms), rate_index from 0.
--          A lease replies wait_ms = its validity (ms) and granted = the
--          block, then one opaque handle per rate; a give back, granted =
--          what rate 0 took back.
-- batch    ARGV[1] = "batch", ARGV[2] = n, then per decision: its number
--          of keys k and its ARGV as above (ops 0-4), its k keys in turn;
--          reply: one reply per decision, or the error it raised (only
--          it fails). One script holds Redis: callers keep batches short.
-- Leases (docs/semantics.md, Leases): a block is granted only if an
-- acquire of it would pass now, and is booked as taken at the end of its
-- validity; a give back happens only where the booking is still on top.
local ACQUIRE, PEEK, RESERVE, UP_TO, REFUND, LEASE, GIVE_BACK = 0, 1, 2, 3, 4, 5, 6
local ALG = {}
-- GIVE_BACK only (a function made per call costs time): for token_bucket and
-- leaky_bucket, whether the booking a handle names is still on top, and then
-- (the latest time its permits may have been taken, grant time, amount before
-- the grant, permits used)
local bucket_booking
if ARGV[3] == '6' then
  bucket_booking = function(handle, stored_ts, stored_amount, same_period, permits, now)
    local ts, amount, before, g, block = string.match(handle, '^(%-?%d+):(%-?%d+):(%-?%d+):(%-?%d+):(%d+)$')
    ts, g, block = tonumber(ts), tonumber(g), tonumber(block)
    if not ts or tonumber(stored_ts) ~= ts or tonumber(stored_amount) ~= tonumber(amount) or not same_period
        or permits > block or now < g then
      return nil
    end
    return math.min(now, ts), g, tonumber(before), block - permits
  end
end
-- only the algorithms asked for are made (a closure per call costs time)
local function define(algorithm)
if algorithm == 'fixed_window' then
--@include algorithms/fixed_window.lua
elseif algorithm == 'sliding_log' then
--@include algorithms/sliding_log.lua
elseif algorithm == 'sliding_window' then
--@include algorithms/sliding_window.lua
elseif algorithm == 'token_bucket' then
--@include algorithms/token_bucket.lua
elseif algorithm == 'leaky_bucket' then
--@include algorithms/leaky_bucket.lua
elseif algorithm == 'gcra' then
--@include algorithms/gcra.lua
end
end

local server_now -- us: TIME is read once per call, however many decisions it makes

-- One decision: its keys are KEYS[kb + 1 .. kb + nk], its arguments
-- ARGV[ab + 1 ..] (the single form's layout).
local function limit(kb, nk, ab)
  local now = tonumber(ARGV[ab + 1]) * 1000 -- us
  if now == 0 then
    if not server_now then
      local t = redis.call('TIME')
      server_now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
    now = server_now
  end
  local algorithm = ARGV[ab + 2]
  local decide = ALG[algorithm]
  local op, permits, max_wait, initial = tonumber(ARGV[ab + 3]), tonumber(ARGV[ab + 4]), tonumber(ARGV[ab + 5]),
    tonumber(ARGV[ab + 6])
  if nk == 1 and op ~= UP_TO and op < LEASE then
    -- one rate: it binds, and no tables or closures for combining rates
    local r, write = decide(KEYS[kb + 1], now, {limit = tonumber(ARGV[ab + 7]), period = tonumber(ARGV[ab + 8]),
                                                burst = tonumber(ARGV[ab + 9])}, permits, op, max_wait, initial)
    -- the reply grows in place (as combine() would make it): one table less
    if r[1] == 0 then
      r[6], r[7] = 0, 0
    else
      if write then write() end
      r[4], r[7] = -1, permits
    end
    r[8] = 0
    return r
  end
  local keys, rates = {}, {}
  for i = 1, nk do
    local at = ab + 7 + 3 * (i - 1)
    keys[i] = KEYS[kb + i]
    rates[i] = {limit = tonumber(ARGV[at]), period = tonumber(ARGV[at + 1]), burst = tonumber(ARGV[at + 2])}
  end

  local function decide_all(n, o)
    local replies, writes, ok = {}, {}, true
    for i = 1, nk do
      replies[i], writes[i] = decide(keys[i], now, rates[i], n, o, max_wait, initial)
      if replies[i][1] == 0 then ok = false end
    end
    if not ok and o ~= PEEK then
      -- nothing is consumed: the rates that would admit report their state as it stays
      -- (still as admitting: a peek of a reserve it would book can deny)
      for i = 1, nk do
        if replies[i][1] == 1 then
          local r = decide(keys[i], now, rates[i], n, PEEK, max_wait, initial)
          replies[i] = {1, r[2], r[3], -1, r[5], 0}
        end
      end
    end
    return replies, writes, ok
  end

  local function combine(replies, ok, granted)
    local pick, remaining, reset, wait = 1, replies[1][3], 0, 0
    for i, r in ipairs(replies) do
      local best = replies[pick]
      if ok then
        if r[3] < best[3] then pick = i end
      elseif r[1] == 0 and (best[1] == 1 or r[4] > best[4]) then
        pick = i
      end
      remaining = math.min(remaining, r[3])
      reset, wait = math.max(reset, r[5]), math.max(wait, r[6])
    end
    local r = replies[pick]
    if not ok then return {0, r[2], remaining, r[4], reset, 0, 0, pick - 1} end
    return {1, r[2], remaining, -1, reset, wait, granted, pick - 1}
  end

  if op == LEASE then
    local probe, _, ok = decide_all(1, PEEK)
    if ok then
      -- never more than half of what is left, 1 near the limit
      local avail = probe[1][3]
      for _, r in ipairs(probe) do avail = math.min(avail, r[3]) end
      local block = math.min(permits, math.max(1, math.floor(avail / 2)))
      local replies, writes = {}, {}
      for i = 1, nk do
        replies[i], writes[i] = decide(keys[i], now, rates[i], block, LEASE, max_wait, initial)
        -- unreachable (a peek of 1 passed and the block is at most what is left): never book part of it
        if replies[i][1] == 0 then return redis.error_reply('ERR lease: rate ' .. i .. ' refused the block') end
      end
      local valid = max_wait
      for i = 1, nk do
        writes[i]()
        valid = math.min(valid, replies[i][6])
      end
      local r = combine(replies, true, block)
      r[6] = valid -- a rate booked for longer is only stricter
      for i = 1, nk do r[8 + i] = replies[i][7] end
      return r
    end
    -- denied as an acquire of one, which (as any call) starts a new entity's refill
    permits, op = 1, ACQUIRE
  elseif op == GIVE_BACK then
    local replies = {}
    for i = 1, nk do
      local write
      replies[i], write = decide(keys[i], now, rates[i], permits, GIVE_BACK, 0, initial, ARGV[ab + 6 + 3 * nk + i])
      if write then write() end
    end
    local r = combine(replies, true, replies[1][7])
    r[6] = 0
    return r
  end
  if op == UP_TO then
    local probe, _, ok = decide_all(1, PEEK)
    if ok then
      for _, r in ipairs(probe) do permits = math.min(permits, r[3]) end
    else
      -- denied as an acquire of one, which (as any call) starts a new entity's refill
      permits = 1
    end
    op = ACQUIRE
  end
  local replies, writes, ok = decide_all(permits, op)
  if ok then
    for i = 1, nk do
      if writes[i] then writes[i]() end
    end
  end
  return combine(replies, ok, permits)
end

if ARGV[1] ~= 'batch' then
  define(ARGV[2])
  return limit(0, #KEYS, 0)
end
-- the batch form: ARGV[2] decisions, each "k, then its single-form ARGV"
-- with its k keys in turn; one reply each, or the error that decision raised
local out, kb, ab = {}, 0, 2
for i = 1, tonumber(ARGV[2]) do
  local nk, algorithm, op = tonumber(ARGV[ab + 1]), ARGV[ab + 3], tonumber(ARGV[ab + 4])
  if op >= LEASE then
    out[i] = redis.error_reply('ERR a batch makes no lease calls')
  else
    if not ALG[algorithm] then define(algorithm) end
    local ok, r = pcall(limit, kb, nk, ab + 1)
    if ok then
      out[i] = r
    elseif type(r) == 'table' and r.err then
      out[i] = r
    else
      out[i] = redis.error_reply('ERR ' .. tostring(r))
    end
  end
  kb, ab = kb + nk, ab + 7 + 3 * nk
end
return out
