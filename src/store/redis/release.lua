-- release_lease(ARGV = node_gen (padded), lease generation): a clean stop
-- ends its live lease now (docs/store.md "Clean stop: releasing the
-- lease"). `expires` becomes this TIME, so from here on every lease script
-- finds the lease lapsed (`now < expires` is false): acquire by a newer
-- lifecycle succeeds at once, the same lifecycle gets 'expired'. The record
-- stays, keeping the newest NodeGeneration and OwnerLeaseGeneration that the
-- next lifecycle's must go past.
local r = redis.call('HMGET', lease_key, 'node_gen', 'gen', 'expires')
if r[1] == ARGV[1] and r[2] == ARGV[2] and now < (tonumber(r[3]) or 0) then
  redis.call('HSET', lease_key, 'expires', string.format('%.0f', now))
  return {'released'}
end
-- Lapsed, released already, replaced by a newer lifecycle, or never given:
-- over already, and another lifecycle's lease is not this one's to end.
return {'over'}
