-- wrk: reads the newest 20 items of one of the seeded sessions, at random.
local SESSIONS = tonumber(os.getenv("SESSIONS") or "1000")
request = function()
  return wrk.format("GET", "/v1/sessions/bench-" .. math.random(1, SESSIONS) .. "/items?order=desc&limit=20")
end
