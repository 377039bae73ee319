-- lease(): the record as it is; the client judges liveness by the server
-- time the reply carries.
if redis.call('EXISTS', lease_key) == 0 then
  return {'none'}
end
return lease_reply('lease')
