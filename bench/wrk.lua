-- wrk script for `make bench` (bench/main.go sets the environment):
--   BENCH_METHOD  GET, POST, PUT or PATCH
--   BENCH_PATH    request path; each "{id}" is replaced by a random id from BENCH_ID_LO..BENCH_ID_HI
--                 (a contact's), each "{bid}" by one from BENCH_BID_LO..BENCH_BID_HI (a business record's)
--   BENCH_BODY    request body (JSON); "{rand}" is replaced by a random number, the same in each place,
--                 and "{id}" and "{bid}" as in the path, and "{oid}" by one from BENCH_OID_LO..BENCH_OID_HI
--                 (an organization's), each place its own
--   BENCH_KEY     the x-api-key
--   BENCH_KEYED   "true": each request carries an Idempotency-Key of its own
-- bench/main.go reads wrk's own report (--latency): Requests/sec, the 99% line and the errors.

local method = os.getenv("BENCH_METHOD") or "GET"
local path = os.getenv("BENCH_PATH") or "/"
local body = os.getenv("BENCH_BODY")
local lo = tonumber(os.getenv("BENCH_ID_LO") or "1")
local hi = tonumber(os.getenv("BENCH_ID_HI") or "1")
local blo = tonumber(os.getenv("BENCH_BID_LO") or "1")
local bhi = tonumber(os.getenv("BENCH_BID_HI") or "1")
local olo = tonumber(os.getenv("BENCH_OID_LO") or "1")
local ohi = tonumber(os.getenv("BENCH_OID_HI") or "1")
local function has(s, placeholder)
  return s ~= nil and s:find(placeholder, 1, true) ~= nil
end
local randomPath = has(path, "{id}") or has(path, "{bid}")
local randomBody = has(body, "{rand}") or has(body, "{id}") or has(body, "{bid}") or has(body, "{oid}")
local function contactID()
  return tostring(math.random(lo, hi))
end
local function businessID()
  return tostring(math.random(blo, bhi))
end
local function organizationID()
  return tostring(math.random(olo, ohi))
end
local keyed = os.getenv("BENCH_KEYED") == "true"
local sent = 0

wrk.method = method
wrk.headers["x-api-key"] = os.getenv("BENCH_KEY") or ""
if body ~= nil and body ~= "" then
  wrk.headers["Content-Type"] = "application/json"
  wrk.body = body
end

-- A request with a random id and no random body is two pieces formatted once, in init (wrk sets
-- the Host header only then), with the id put between them, as wrk's example scripts format their
-- requests in init: a wrk.format per request cost wrk 2-4 of its 16 us of CPU per retrieve, on
-- the cores the server and PostgreSQL share.
local head, tail

local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

function init(args)
  math.randomseed(os.time() * 1000 + (tid or 0) * 7919)
  if has(path, "{id}") and not has(path, "{bid}") and not randomBody and not keyed then
    local marker = "\0ID\0"
    local whole = wrk.format(nil, (path:gsub("{id}", marker)))
    local at = whole:find(marker, 1, true)
    head, tail = whole:sub(1, at - 1), whole:sub(at + #marker)
  end
end

function request()
  if head then
    return head .. math.random(lo, hi) .. tail
  end
  local p = path
  if randomPath then
    p = p:gsub("{id}", contactID):gsub("{bid}", businessID)
  end
  local b = nil
  if randomBody then
    b = body:gsub("{rand}", tostring(math.random(1, 1000000000))):gsub("{id}", contactID):gsub("{bid}", businessID):gsub("{oid}", organizationID)
  end
  if keyed then
    sent = sent + 1
    wrk.headers["Idempotency-Key"] = string.format("bench-%d-%d-%d", os.time(), tid or 0, sent)
  end
  return wrk.format(nil, p, nil, b)
end
