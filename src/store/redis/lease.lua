-- The prelude of every lease script (docs/store.md "Scripts"). KEYS[1] is the
-- node's lease, a hash (hash tag {NodeRid}); no other key is touched. The
-- record is never deleted: it keeps the node's newest NodeGeneration and
-- OwnerLeaseGeneration, which is what makes the next ones greater.
local lease_key = KEYS[1]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])

-- The record and the server's time (us), so the client can tell how long
-- the lease has left without comparing its clock with the server's.
local function lease_reply(tag)
  local r = redis.call('HMGET', lease_key, 'node_gen', 'gen', 'mesh', 'expires')
  return {tag, r[1], r[2], r[3], r[4], string.format('%.0f', now)}
end

local function extend(term)
  redis.call('HSET', lease_key, 'expires', string.format('%.0f', now + term))
end
