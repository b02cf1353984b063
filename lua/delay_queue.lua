-- delay_queue: a ZSET of messages scored by due time, popped
-- atomically so no two consumers ever get the same message. A message is its
-- own id: pushing one already queued changes nothing (producers may retry).
-- Undelivered messages are kept 7 days past the latest due time.
-- Bounded work per call: push is O(log n); pop takes at most `max` due
-- messages (capped at 10,000 here too, as in the client) with one range read
-- and one ZREMRANGEBYRANK (the due messages are the lowest-scored ones):
-- O(log n + max) plus the bytes it returns.
-- KEYS[1] zset {message -> due ms}
-- ARGV[1] op: push | pop
--   push: ARGV[2] message, ARGV[3] delay_ms, ARGV[4] channel to PUBLISH on
--         when the message becomes the head   reply: 1 added, 0 already queued
--         ARGV[5] PUBLISH, or SPUBLISH in a cluster (the channel shares the key's slot)
--   pop:  ARGV[2] max                          reply: {ms until the next due
--         message or -1, message...}
local key, op = KEYS[1], ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local retention = 7 * 24 * 3600 * 1000

if op == 'push' then
  local message, due = ARGV[2], now + tonumber(ARGV[3])
  local added = redis.call('ZADD', key, 'NX', due, message)
  if added == 1 then
    if redis.call('ZRANGE', key, 0, 0)[1] == message then
      redis.call(ARGV[5] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', ARGV[4], due)
    end
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    redis.call('PEXPIRE', key, tonumber(last[2]) - now + retention)
  end
  return added
end

local max = math.min(tonumber(ARGV[2]), 10000)
local due = redis.call('ZRANGEBYSCORE', key, '-inf', string.format('%d', now), 'LIMIT', 0, max)
if #due > 0 then redis.call('ZREMRANGEBYRANK', key, 0, #due - 1) end
local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
local next_in = -1
if head[2] ~= nil then next_in = math.max(0, tonumber(head[2]) - now) end
table.insert(due, 1, next_in)
return due
