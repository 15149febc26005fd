-- wrk script: each connection waits PACE_MS milliseconds between requests, so the offered rate is
-- about connections * 1000 / PACE_MS requests per second (wrk reports what was achieved).
local pace = tonumber(os.getenv("PACE_MS") or "1")
function delay()
  return pace
end
