-- acquire_lease(ARGV = node_gen (padded), mesh, term_us).
local r = redis.call('HMGET', lease_key, 'node_gen', 'gen', 'expires')
local term = tonumber(ARGV[3])
if not r[1] then
  redis.call('HSET', lease_key, 'node_gen', ARGV[1], 'gen', '1', 'mesh', ARGV[2])
  extend(term)
  return lease_reply('ok')
end
local live = now < (tonumber(r[3]) or 0)
if r[1] == ARGV[1] then
  -- The same lifecycle again (a retry) renews; a lapsed one stays dead.
  if not live then
    return lease_reply('expired')
  end
  extend(term)
  return lease_reply('ok')
end
if ARGV[1] < r[1] then
  return lease_reply('stale')
end
if live then
  return lease_reply('held')
end
redis.call('HINCRBY', lease_key, 'gen', 1)
redis.call('HSET', lease_key, 'node_gen', ARGV[1], 'mesh', ARGV[2])
extend(term)
return lease_reply('ok')
