-- remove(ARGV[4..5] = expected owner, authority): ends the incarnation; the
-- generations stay, so the next create goes past them.
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
redis.call('HSET', row_key, 'live', '0')
redis.call('HDEL', row_key, 'aborted_by', 'aborted_seq')
return {'removed'}
