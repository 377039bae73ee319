-- lookup(): the live row, if any.
local state = row_state()
if state == 'live' then
  return row_reply('row')
end
if state == 'unknown' then
  return need_reply()
end
return {'absent'}
