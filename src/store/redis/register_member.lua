-- register_member(ARGV = node, node_gen (padded), lease generation, mesh,
-- address, claim_until).
if not (now < (tonumber(ARGV[6]) or 0)) then
  return {'claim'}
end
local node = ARGV[1]
local held = redis.call('HMGET', members_key, node .. ':node_gen', node .. ':lease', node .. ':until')
if held[1] and ARGV[2] < held[1] then
  -- A newer lifecycle registered: an older one never comes back.
  return {'stale'}
end
if held[1] == ARGV[2] and held[2] == ARGV[3] and held[3] == '0' then
  -- This lifecycle released this lease (release_member.lua): it never
  -- comes back either, even with a bound a client read before the release.
  return {'stale'}
end
local until_text = ARGV[6]
if held[1] == ARGV[2] and held[2] == ARGV[3] and (tonumber(held[3]) or 0) > tonumber(ARGV[6]) then
  -- Both bounds are true facts of the same lease: keep the later.
  until_text = held[3]
end
redis.call('HSET', members_key, node .. ':node_gen', ARGV[2], node .. ':lease', ARGV[3],
  node .. ':mesh', ARGV[4], node .. ':addr', ARGV[5], node .. ':until', until_text)
return {'ok', until_text, now_text}
