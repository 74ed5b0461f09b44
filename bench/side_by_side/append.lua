-- wrk: appends one ~200-byte item to one of the seeded sessions, at random.
local SESSIONS = tonumber(os.getenv("SESSIONS") or "1000")
local content = string.rep("x", 170)
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"items":[{"role":"user","content":"' .. content .. '"}]}'

request = function()
  return wrk.format(nil, "/v1/sessions/bench-" .. math.random(1, SESSIONS) .. "/items")
end
