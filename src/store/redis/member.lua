-- The prelude of the membership scripts (docs/store.md "Membership").
-- KEYS[1] is the cluster's one membership hash; no other key is touched.
-- Each node has five fields, `<NodeRid>:node_gen` (padded), `:lease`,
-- `:mesh`, `:addr` and `:until` (a server time, us, until which the lease
-- it registered under is known live; 0 once that lifecycle released the
-- lease, release_member.lua). Entries are never deleted: the newest
-- NodeGeneration per NodeRid is what fences older lifecycles out.
local members_key = KEYS[1]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local now_text = string.format('%.0f', now)
