-- release_member(ARGV = node, node_gen (padded), lease generation): run
-- after release.lua ended that lease. The node's entry, if it still names
-- that lifecycle and lease, is marked released (`until` = 0, which no
-- registration writes: a registered bound is always in the future). That
-- is a fact that stays true, like a lapse: members() skips the entry at
-- once, whatever later bound of the lease a client remembers, and
-- register_member refuses the lifecycle. An entry of another lifecycle
-- (a newer one that registered meanwhile) is left alone.
local node = ARGV[1]
local held = redis.call('HMGET', members_key, node .. ':node_gen', node .. ':lease')
if held[1] == ARGV[2] and held[2] == ARGV[3] then
  redis.call('HSET', members_key, node .. ':until', '0')
  return {'released'}
end
return {'over'}
