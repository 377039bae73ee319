-- create(ARGV[4..8] = claim mesh, owner, node_gen, lease, claim_until):
-- create-if-absent.
if not claim_is_live(ARGV[8]) then
  return {'claim'}
end
local state = row_state()
if state == 'live' then
  return row_reply('existing')
end
if state == 'unknown' then
  return need_reply()
end
-- The counters outlive every incarnation: the new one goes past them.
redis.call('HINCRBY', row_key, 'object', 1)
redis.call('HINCRBY', row_key, 'authority', 1)
set_owner(ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8])
return row_reply('new')
