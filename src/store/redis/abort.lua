-- abort_relocation(ARGV[4..5] = expected owner, authority; ARGV[6..7] =
-- relocation coordinator, sequence): the durable abort.
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
-- Keep the latest: an older abort arriving late must not lift a newer one.
if not is_aborted(ARGV[6], ARGV[7]) then
  redis.call('HSET', row_key, 'aborted_by', ARGV[6], 'aborted_seq', ARGV[7])
end
return {'aborted'}
