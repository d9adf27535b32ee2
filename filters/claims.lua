-- A claim of the book, [the sentence]{.claim #clm-...}, is one click from its evidence: after the
-- sentence, a small "test" mark links to the claim's row in the Claims appendix
-- (chapters/claims.qmd), and its tooltip names the test that asserts the sentence and what the
-- ledger (data/ledger.json) says of it: its status on the book's JAX and on how many releases it holds.
local function root()
  if quarto and quarto.project and quarto.project.directory then
    return quarto.project.directory
  end
  return pandoc.path.directory(pandoc.path.directory(PANDOC_SCRIPT_FILE))
end

local function read(path)
  local file = io.open(path, "r")
  if not file then
    return nil
  end
  local text = file:read("a")
  file:close()
  return text
end

-- {clm-id = "tests/test_x.py::test_y"}, read from the tests as tests/test_claims.py reads them.
local function claim_tests()
  local found = {}
  local ok, names = pcall(pandoc.system.list_directory, pandoc.path.join({root(), "tests"}))
  if not ok then
    return found
  end
  for _, name in ipairs(names) do
    if name:match("^test_.*%.py$") then
      local text = read(pandoc.path.join({root(), "tests", name})) or ""
      local pattern = 'mark%.claim%(%s*"sec%-[%w%-]+"%s*,%s*"(clm%-[%w%-]+)"%s*%).-\n%s*def%s+([%w_]+)'
      for span, test in text:gmatch(pattern) do
        found[span] = "tests/" .. name .. "::" .. test
      end
    end
  end
  return found
end

-- What the ledger says of a test (its parametrised cases together): the book's release, its status
-- there, and on how many releases it holds.
local function ledger_words(ledger, test)
  if not ledger or not ledger.claims then
    return "not yet in the ledger"
  end
  local lock, holds, releases, here = ledger.lock, 0, 0, nil
  for release, _ in pairs(ledger.releases or {}) do
    local status = nil
    for key, claim in pairs(ledger.claims) do
      if key == test or key:sub(1, #test + 1) == test .. "[" then
        local row = (claim.results or {})[release]
        if row and status ~= "fails" then
          status = row.status
        end
      end
    end
    if status then
      releases = releases + 1
      holds = holds + (status == "holds" and 1 or 0)
      if release == lock then
        here = status
      end
    end
  end
  if releases == 0 then
    return "not yet in the ledger"
  end
  return string.format("%s on JAX %s, the book's; holds on %d of %d releases of the ledger",
    here or "not run", lock, holds, releases)
end

local tests, ledger = nil, nil

local function evidence(id)
  if tests == nil then
    tests = claim_tests()
    -- pandoc.json arrived in pandoc 3.1 (Quarto's); quarto.json stands in under older pandocs
    local decode = (pandoc.json and pandoc.json.decode) or (quarto and quarto.json and quarto.json.decode)
    local ok, decoded = false, nil
    if decode then
      ok, decoded = pcall(decode, read(pandoc.path.join({root(), "data", "ledger.json"})) or "")
    end
    ledger = ok and type(decoded) == "table" and decoded or nil
  end
  local test = tests[id]
  if not test then
    return "The test that asserts this sentence, and the releases it holds on"
  end
  return "Asserted by " .. test:match("::(.*)$") .. ": " .. ledger_words(ledger, test)
end

local function appendix()
  local input = (quarto and quarto.doc and quarto.doc.input_file) or ""
  if input:match("chapters[/\\][^/\\]+$") then
    return "claims.html"
  end
  return "chapters/claims.html"
end

function Span(el)
  if not el.classes:includes("claim") or not el.identifier:match("^clm%-") then
    return nil
  end
  if not quarto.doc.is_format("html") then
    return nil
  end
  local link = pandoc.Link(
    {pandoc.Str("test")},
    appendix() .. "#ev-" .. el.identifier,
    evidence(el.identifier),
    pandoc.Attr("", {"claim-evidence"})
  )
  el.content:insert(pandoc.Superscript({link}))
  return el
end
