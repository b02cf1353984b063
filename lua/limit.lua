-- limit: every rate-limiting decision, for every algorithm (the functions
-- in lua/algorithms/, included at build time). An entity may be held to
-- several rates at once ("10/second" and "1000/hour"): each rate has its own
-- key, all in the entity's hash slot, and a call is admitted only if every
-- rate admits it; then all consume, else none does.
-- KEYS[i]  the state of rate i
-- ARGV     now_ms (0 = Redis TIME), algorithm, op, permits, max_wait_ms,
--          initial tokens (-1: a new entity starts full), then
--          limit, period_ms, burst for each rate; or the short form
--          (below): algorithm, then op, permits, limit, period_ms, burst
--          packed in one string, five little-endian int64 complemented
-- op       0 acquire, 1 peek (writes nothing), 2 reserve (book a slot up
--          to max_wait_ms away), 3 acquire up to `permits` (as many as all
--          rates allow, at least 1), 4 refund (give `permits` back),
--          5 lease (a block of up to `permits`, valid up to max_wait_ms),
--          6 give back (`permits` unused of a lease; ARGV after the rate
--          triples: the lease's handles in rate order); a lease's ARGV
--          ends with its booking id, which its handles carry)
-- reply    {allowed, limit, remaining, retry_after_ms, reset_after_ms,
--          wait_ms, granted, rate_index}: the rate that binds reports
--          limit and remaining (the smallest remaining; when denied, the
--          denial with the longest retry_after_ms), rate_index from 0.
--          A lease replies wait_ms = its validity (ms) and granted = the
--          block, then one opaque handle per rate and the server's time
--          (ms); a give back, granted = what rate 0 took back.
-- batch    ARGV[1] = "batch", ARGV[2] = n, then per decision (ops 0-4)
--          one of: its number of keys k and its ARGV as above; "*" and a
--          short form's two arguments (one key); "=" and permits, the
--          arguments of the decision before but for permits (a limiter's
--          decisions for many ids: 2 arguments, not 7 + 3k; packed after
--          a short form). KEYS: each decision's in turn. Reply: one reply
--          per decision, or the error it raised (only it fails). One
--          script holds Redis: callers keep batches short.
-- Leases (docs/semantics.md, Leases): a block is granted only if an
-- acquire of it would pass now, and is booked as taken at the end of its
-- validity; a give back happens only where the state still holds that
-- booking, by its id (a coincidence of counts or times proves nothing).
-- Cost (docs/benchmarks.md, "Redis CPU per decision against the floor"):
-- what one decision of one rate runs is kept to its algorithm's body. A closure costs an allocation per upvalue it
-- captures, so the functions below capture none on that path; tonumber()
-- converts a string twice (lua_isnumber, then lua_tonumber), arithmetic
-- once: numbers are read as `s + 0` where they cannot be anything else
-- (ARGV as the core builds it, TIME, digits a pattern matched); stored hash
-- fields by tonumber(), so that a field that is not a number reads as none.
local UP_TO, LEASE = 3, 5
-- whether this decision's now is Redis TIME (else an explicit clock, which
-- may jump): with the server's clock a window's TTL, its end, is set once
-- per window, and later writes in it leave it be (one call fewer)
local server_clock = false

-- token_bucket's and leaky_bucket's write: their amount (`field`: level,
-- water) as of ts under period, for ttl ms; at ttl 0 the state is fresh
-- and the key goes. booking: a lease's id, kept as `bk` (else a `bk` the
-- state had goes: the booking is no longer on top)
local function bucket_store(key, field, amount, ts, period, ttl, booking, had_booking)
  if ttl <= 0 then return redis.call('DEL', key) end
  if booking then
    redis.call('HSET', key, field, amount, 'ts', ts, 'period', period, 'bk', booking)
  else
    redis.call('HSET', key, field, amount, 'ts', ts, 'period', period)
    if had_booking then redis.call('HDEL', key, 'bk') end
  end
  redis.call('PEXPIRE', key, ttl)
end

-- The function of one algorithm (only the one asked for is made):
--   decide(key, now_us, limit, period_ms, burst, permits, op, max_wait_ms,
--          initial, commit[, handle, booking])
-- returns that rate's reply alone (granted = permits when it admits, a
-- lease's handle in its place; rate_index 0). With commit it has written
-- what it admits; else it returns the write too, as {function, its
-- arguments...} (nil: nothing to write; a table costs less than a
-- closure). handle and booking: GIVE_BACK only.
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

-- One rate (here and in the batch loop below; limit() gets one only for
-- acquire up to and leases): it binds, it writes as it decides, and its
-- reply is the reply.
-- The short form, the core's usual call: ARGV = algorithm, then op, permits,
-- limit, period_ms, burst as five little-endian int64 in one string (each
-- argument costs Redis an object and a Lua string, and each number in
-- decimal a strtod), each complemented (~n, read as -n - 1: the usual
-- numbers have no zero byte, so tools that cannot send one can replay
-- the call); now is Redis TIME, max_wait_ms 0, no initial tokens; op
-- neither acquire up to nor a lease's.
local SHORT_FORM = '<i8i8i8i8i8'
if #ARGV == 2 then
  local t = redis.call('TIME')
  server_clock = true
  local op, permits, rate_limit, period, burst = struct.unpack(SHORT_FORM, ARGV[2])
  return define(ARGV[1])(KEYS[1], t[1] * 1000000 + t[2], -rate_limit - 1, -period - 1, -burst - 1, -permits - 1,
                         -op - 1, 0, -1, true)
end
if ARGV[1] ~= 'batch' and #KEYS == 1 then
  local op = ARGV[3] + 0
  if op ~= UP_TO and op < LEASE then
    local now = ARGV[1] * 1000 -- us
    if now == 0 then
      local t = redis.call('TIME')
      now, server_clock = t[1] * 1000000 + t[2], true
    end
    return define(ARGV[2])(KEYS[1], now, ARGV[7] + 0, ARGV[8] + 0, ARGV[9] + 0, ARGV[4] + 0, op, ARGV[5] + 0,
                           ARGV[6] + 0, true)
  end
end

-- Several rates (and acquire up to, leases, give backs) --------------------

-- runs a write an algorithm returned
local function run(write)
  if write then write[1](unpack(write, 2)) end
end

-- rate i of a decision (keys from KEYS[kb + 1], arguments from ARGV[ab + 1]) decides, writing nothing
local function decide_rate(decide, kb, ab, i, now, p, o, max_wait, initial, handle, booking)
  local at = ab + 4 + 3 * i
  return decide(KEYS[kb + i], now, ARGV[at] + 0, ARGV[at + 1] + 0, ARGV[at + 2] + 0, p, o, max_wait, initial, false,
                handle, booking)
end

-- every rate decides; none writes: the writes come back, to make if all admit
local function decide_all(decide, kb, ab, nk, now, p, o, max_wait, initial)
  local PEEK = 1
  local replies, writes, ok = {}, {}, true
  for i = 1, nk do
    replies[i], writes[i] = decide_rate(decide, kb, ab, i, now, p, o, max_wait, initial)
    if replies[i][1] == 0 then ok = false end
  end
  if not ok and o ~= PEEK then
    -- nothing is consumed: the rates that would admit report their state as it stays
    -- (still as admitting: a peek of a reserve it would book can deny)
    for i = 1, nk do
      if replies[i][1] == 1 then
        local r = decide_rate(decide, kb, ab, i, now, p, PEEK, max_wait, initial)
        replies[i] = {1, r[2], r[3], -1, r[5], 0, 0, 0}
      end
    end
  end
  return replies, writes, ok
end

-- the decision's reply, made of the rates' replies (in place: the binding one)
local function combine(replies, ok, granted)
  local pick, remaining, reset, wait = 1, replies[1][3], 0, 0
  for i = 1, #replies do
    local r, best = replies[i], replies[pick]
    if ok then
      if r[3] < best[3] then pick = i end
    elseif r[1] == 0 and (best[1] == 1 or r[4] > best[4]) then
      pick = i
    end
    if r[3] < remaining then remaining = r[3] end
    if r[5] > reset then reset = r[5] end
    if r[6] > wait then wait = r[6] end
  end
  local r = replies[pick]
  r[3], r[5], r[8] = remaining, reset, pick - 1
  if ok then
    r[4], r[6], r[7] = -1, wait, granted
  else
    r[6], r[7] = 0, 0
  end
  return r
end

local server_now -- us: TIME is read once per call, however many decisions it makes

-- a decision's now (us): its explicit clock, or else the server's
local function decision_now(clock)
  server_clock = clock == 0
  if not server_clock then return clock end
  if not server_now then
    local t = redis.call('TIME')
    server_now = t[1] * 1000000 + t[2]
  end
  return server_now
end

-- One decision: its keys are KEYS[kb + 1 .. kb + nk], its arguments
-- ARGV[ab + 1 ..] (the single form's layout) but for permits.
local function limit(decide, kb, nk, ab, permits)
  local ACQUIRE, PEEK, UP_TO, LEASE, GIVE_BACK = 0, 1, 3, 5, 6
  local now = decision_now(ARGV[ab + 1] * 1000)
  local op, max_wait, initial = ARGV[ab + 3] + 0, ARGV[ab + 5] + 0, ARGV[ab + 6] + 0
  if op == LEASE then
    local probe, _, ok = decide_all(decide, kb, ab, nk, now, 1, PEEK, max_wait, initial)
    if ok then
      -- never more than half of what is left, 1 near the limit
      local avail = probe[1][3]
      for _, r in ipairs(probe) do avail = math.min(avail, r[3]) end
      local block = math.min(permits, math.max(1, math.floor(avail / 2)))
      local replies, writes, handles = {}, {}, {}
      local booking = ARGV[ab + 7 + 3 * nk] -- the booking's identity, kept in the state for its give-back
      for i = 1, nk do
        replies[i], writes[i] = decide_rate(decide, kb, ab, i, now, block, LEASE, max_wait, initial, booking)
        -- unreachable (a peek of 1 passed and the block is at most what is left): never book part of it
        if replies[i][1] == 0 then return redis.error_reply('ERR lease: rate ' .. i .. ' refused the block') end
      end
      local valid = max_wait
      for i = 1, nk do
        run(writes[i])
        valid = math.min(valid, replies[i][6])
        handles[i] = replies[i][7]
      end
      local r = combine(replies, true, block)
      r[6] = valid -- a rate booked for longer is only stricter
      for i = 1, nk do r[8 + i] = handles[i] end
      r[9 + nk] = math.floor(now / 1000) -- the client checks the server's clock against its own
      return r
    end
    -- denied as an acquire of one, which (as any call) starts a new entity's refill
    permits, op = 1, ACQUIRE
  elseif op == GIVE_BACK then
    -- for token_bucket and leaky_bucket, whether the booking a handle names is still on top (its id is the
    -- state's: every other write drops it) under the rate it was made, and then (the latest time its permits
    -- may have been taken, grant time, amount before the grant, permits used)
    local function bucket_booking(handle, stored, same_rate, n, t)
      local ts, amount, before, g, block, id =
        string.match(handle, '^(%-?%d+):(%-?%d+):(%-?%d+):(%-?%d+):(%d+):(%x+)$')
      ts, g, block = tonumber(ts), tonumber(g), tonumber(block)
      if not ts or not stored[4] or string.sub(stored[4], 1, #id + 1) ~= id .. ':' or tonumber(stored[2]) ~= ts
          or tonumber(stored[1]) ~= tonumber(amount) or not same_rate or n > block or t < g then
        return nil
      end
      return math.min(t, ts), g, tonumber(before), block - n
    end
    local replies = {}
    for i = 1, nk do
      local write
      replies[i], write = decide_rate(decide, kb, ab, i, now, permits, GIVE_BACK, 0, initial, ARGV[ab + 6 + 3 * nk + i],
                                      bucket_booking)
      run(write)
    end
    local r = combine(replies, true, replies[1][7])
    r[6] = 0
    return r
  end
  if op == UP_TO then
    local probe, _, ok = decide_all(decide, kb, ab, nk, now, 1, PEEK, max_wait, initial)
    if ok then
      for _, r in ipairs(probe) do permits = math.min(permits, r[3]) end
    else
      -- denied as an acquire of one, which (as any call) starts a new entity's refill
      permits = 1
    end
    op = ACQUIRE
  end
  local replies, writes, ok = decide_all(decide, kb, ab, nk, now, permits, op, max_wait, initial)
  if ok then
    for i = 1, nk do run(writes[i]) end
  end
  return combine(replies, ok, permits)
end

if ARGV[1] ~= 'batch' then
  return limit(define(ARGV[2]), 0, #KEYS, 0, ARGV[4] + 0)
end
-- the batch form: ARGV[2] decisions, each "k, then its single-form ARGV",
-- "*, then its short form's ARGV" or "=, permits", with its keys in turn;
-- one reply each, or the error that decision raised
local out, decides, kb, ab = {}, {}, 0, 2
-- the arguments "=" repeats: where they start (less 1), and read once for
-- one rate (as the one-rate path above reads them; else limit() does);
-- short: they were a short form's
local nk, algorithm, op, spec, permits, decide, direct, clock, max_wait, initial, rate_limit, period, burst, short
for i = 1, ARGV[2] + 0 do
  local first = ARGV[ab + 1]
  if first == '=' then
    if short then permits = -struct.unpack('<i8', ARGV[ab + 2]) - 1 else permits = ARGV[ab + 2] + 0 end
    ab = ab + 2
  else
    short = first == '*'
    if short then
      nk, algorithm, clock, max_wait, initial, direct = 1, ARGV[ab + 2], 0, 0, -1, true
      op, permits, rate_limit, period, burst = struct.unpack(SHORT_FORM, ARGV[ab + 3])
      -- read back as in the single short form above (inline: a helper's closure per call cost 1.5-2%)
      op, permits, rate_limit, period, burst = -op - 1, -permits - 1, -rate_limit - 1, -period - 1, -burst - 1
      ab = ab + 3
    else
      nk, algorithm, op, spec, permits = first + 0, ARGV[ab + 3], ARGV[ab + 4] + 0, ab + 1, ARGV[ab + 5] + 0
      direct = nk == 1 and op ~= UP_TO
      if direct then
        clock, max_wait, initial = ARGV[ab + 2] * 1000, ARGV[ab + 6] + 0, ARGV[ab + 7] + 0
        rate_limit, period, burst = ARGV[ab + 8] + 0, ARGV[ab + 9] + 0, ARGV[ab + 10] + 0
      end
      ab = ab + 7 + 3 * nk
    end
    decide = decides[algorithm]
    if not decide then
      decide = define(algorithm)
      decides[algorithm] = decide
    end
  end
  if op >= LEASE then
    out[i] = redis.error_reply('ERR a batch makes no lease calls')
  else
    local ok, r
    if direct then
      ok, r = pcall(decide, KEYS[kb + 1], decision_now(clock), rate_limit, period, burst, permits, op, max_wait,
                    initial, true)
    else
      ok, r = pcall(limit, decide, kb, nk, spec, permits)
    end
    if ok then
      out[i] = r
    elseif type(r) == 'table' and r.err then
      out[i] = r
    else
      out[i] = redis.error_reply('ERR ' .. tostring(r))
    end
  end
  kb = kb + nk
end
return out
