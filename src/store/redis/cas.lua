-- compare_and_set(ARGV[4..5] = expected owner, authority; ARGV[6..7] =
-- relocation coordinator, sequence; ARGV[8..12] = new owner's claim mesh,
-- owner, node_gen, lease, claim_until).
if not claim_is_live(ARGV[12]) then
  return {'claim'}
end
local state = row_state()
if state == 'unknown' then
  return need_reply()
end
if state ~= 'live' then
  return {'absent'}
end
if not version_is(ARGV[4], ARGV[5]) then
  return row_reply('conflict')
end
if is_aborted(ARGV[6], ARGV[7]) then
  return {'aborted'}
end
redis.call('HINCRBY', row_key, 'authority', 1)
set_owner(ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12])
return row_reply('swapped')
