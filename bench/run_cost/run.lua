-- A one-turn sync run on a fresh session per request; `prefix`, set per thread, keeps
-- the threads' session ids apart.
prefix = ""
local counter = 0
function setup(thread)
  thread:set("prefix", tostring(math.random(1, 1000000000)))
end
function request()
  counter = counter + 1
  local path = "/v1/sessions/cost-" .. prefix .. "-" .. counter .. "/runs"
  return wrk.format("POST", path, {["Content-Type"] = "application/json"}, '{"input":"hi"}')
end
