-- renew_lease(ARGV = node_gen (padded), lease generation, term_us).
local r = redis.call('HMGET', lease_key, 'node_gen', 'gen', 'expires')
if r[1] == ARGV[1] and r[2] == ARGV[2] and now < (tonumber(r[3]) or 0) then
  extend(tonumber(ARGV[3]))
  return lease_reply('ok')
end
return {'expired'}
