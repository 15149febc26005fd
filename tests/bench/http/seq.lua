-- wrk script of the sequence benchmark (tests/bench/seq_bench.sh): requests for random keys of a
-- space, or a fixed path (the reference runs go through this same script, so they pay the same
-- Lua cost per request). Set by environment:
--   SEQ_MODE   single: GET /api/v1/seq/SPACE/{key};  fanout: POST /api/v1/seq/SPACE with
--              {"keys":[...]} of SEQ_KEYS keys;  path: GET SEQ_PATH (a reference)
--   SEQ_SPACE  the space (default bench);  SEQ_KEYS  keys per fan-out (default 1000)
--   SEQ_KEYSPACE  keys are drawn from [0, SEQ_KEYSPACE) (default 1,000,000)
--   SEQ_PATH   the path of mode "path";  PACE_MS  when set, each connection waits that long
--              after each response (paced runs: about connections * 1000 / PACE_MS requests/s)
-- Each thread builds a pool of requests at start (different random keys in each) and cycles
-- through it, so drawing keys costs the client nothing while it measures.
local mode = os.getenv("SEQ_MODE") or "single"
local space = os.getenv("SEQ_SPACE") or "bench"
local fanout = tonumber(os.getenv("SEQ_KEYS") or "1000")
local keyspace = tonumber(os.getenv("SEQ_KEYSPACE") or "1000000")
local fixed_path = os.getenv("SEQ_PATH") or "/"
local pace = tonumber(os.getenv("PACE_MS") or "0")

local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("seed", threads * 7919 + os.time())
end

local pool = {}
local next_request = 1

function init(args)
  math.randomseed(seed or os.time())
  local size
  if mode == "fanout" then
    size = math.max(64, math.floor(200000 / fanout))  -- ~200,000 keys drawn per thread
  elseif mode == "single" then
    size = 100000
  else
    size = 1
  end
  for i = 1, size do
    if mode == "single" then
      pool[i] = wrk.format("GET", "/api/v1/seq/" .. space .. "/" .. math.random(0, keyspace - 1))
    elseif mode == "fanout" then
      local keys = {}
      for j = 1, fanout do keys[j] = '"' .. math.random(0, keyspace - 1) .. '"' end
      pool[i] = wrk.format("POST", "/api/v1/seq/" .. space,
                           {["Content-Type"] = "application/json"},
                           '{"keys":[' .. table.concat(keys, ",") .. ']}')
    else
      pool[i] = wrk.format("GET", fixed_path)
    end
  end
end

function request()
  local r = pool[next_request]
  next_request = next_request + 1
  if next_request > #pool then next_request = 1 end
  return r
end

if pace > 0 then
  function delay()
    return pace
  end
end
