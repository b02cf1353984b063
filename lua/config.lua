-- config: stores a limiter's spec (Redisson's setRate / trySetRate). One
-- hash per limiter name, no TTL: it lives until deleted. All fields are
-- written by one HSET, so readers never see half a spec.
-- KEYS[1]  hash {algorithm, rates = "limit/period_ms/burst;...",
--          initial_tokens, scope}
-- ARGV     if_absent (1: keep a stored spec), then field, value pairs
-- reply    1 stored, 0 a spec was there already (if_absent)
if ARGV[1] == '1' and redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 2))
return 1
