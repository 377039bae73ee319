-- The prelude of every row script (docs/store.md "Scripts"). KEYS[1] is the
-- Actor's row, a hash; the script touches no other key, so it runs on Redis
-- Cluster (one slot per Actor, hash tag {ActorId}).
--
-- ARGV[1..3] is a lease fact the client read from the owner's lease key:
-- owner NodeRid, OwnerLeaseGeneration, and the server time (us) until which
-- that lease is live, or "-1" when it lapsed; "" when the client has none.
-- u64 values that are compared for order travel as 20-digit zero-padded
-- strings, so string order is numeric order (Lua numbers are doubles).
local row_key = KEYS[1]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])

-- 'none' (never created, removed, or ended with its owner's lease), 'live',
-- or 'unknown' (the cached lease bound is past: the client must read the
-- owner's lease and try again with that fact).
local function row_state()
  local r = redis.call('HMGET', row_key, 'live', 'owner', 'lease', 'lease_until')
  if r[1] ~= '1' then
    return 'none'
  end
  local known = tonumber(r[4]) or 0
  if ARGV[1] == r[2] and ARGV[2] == r[3] then
    local fact = tonumber(ARGV[3])
    if fact ~= nil and fact < 0 then
      -- A lapsed lease never comes back: the incarnation ended with it.
      redis.call('HSET', row_key, 'live', '0')
      redis.call('HDEL', row_key, 'aborted_by', 'aborted_seq')
      return 'none'
    end
    if fact ~= nil and fact > known then
      redis.call('HSET', row_key, 'lease_until', ARGV[3])
      known = fact
    end
  end
  if now < known then
    return 'live'
  end
  return 'unknown'
end

local function row_reply(tag)
  local r = redis.call('HMGET', row_key, 'object', 'authority', 'mesh', 'owner', 'node_gen', 'lease')
  return {tag, r[1], r[2], r[3], r[4], r[5], r[6]}
end

local function need_reply()
  local r = redis.call('HMGET', row_key, 'owner', 'lease')
  return {'need', r[1], r[2]}
end

local function claim_is_live(claim_until)
  return now < (tonumber(claim_until) or 0)
end

-- A new version of the row: aborts recorded at the old one cannot concern it.
local function set_owner(mesh, owner, node_gen, lease, lease_until)
  redis.call('HSET', row_key, 'live', '1', 'mesh', mesh, 'owner', owner,
    'node_gen', node_gen, 'lease', lease, 'lease_until', lease_until)
  redis.call('HDEL', row_key, 'aborted_by', 'aborted_seq')
end

local function version_is(owner, authority)
  local r = redis.call('HMGET', row_key, 'owner', 'authority')
  return r[1] == owner and r[2] == authority
end

-- The coordinator recorded this relocation, or a later one of its own,
-- aborted at the current version.
local function is_aborted(coordinator, sequence)
  local r = redis.call('HMGET', row_key, 'aborted_by', 'aborted_seq')
  return r[1] == coordinator and r[2] ~= false and sequence <= r[2]
end
