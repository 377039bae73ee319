-- members(): every entry as it is, and the server time; the client judges
-- each entry's liveness by its bound, or by its lease when the bound is past.
local reply = {'members', now_text}
for _, value in ipairs(redis.call('HGETALL', members_key)) do
  reply[#reply + 1] = value
end
return reply
