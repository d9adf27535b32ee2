-- A claim of the book, [the sentence]{.claim #clm-...}, is one tap from its evidence: after the
-- sentence, a small badge, "claim 12" (✓ when its test holds on the book's JAX), links to the
-- claim's evidence in the Claims appendix (chapters/claims.qmd): the sentence, what its test
-- measured, its marks release by release, its test's code and the way back. The number is the
-- claim's place in reading order, counted as jitbook.ledger.spans.numbers counts it.
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

-- {clm-id = n}: every claim span of the book in reading order, pages as _quarto.yml lists them.
local function claim_numbers()
  local numbers, count, seen = {}, 0, {}
  local order = read(pandoc.path.join({root(), "_quarto.yml"})) or ""
  for stem in order:gmatch("([%w%-_]+)%.qmd") do
    if not seen[stem] then
      seen[stem] = true
      local path = stem == "index" and pandoc.path.join({root(), "index.qmd"})
        or pandoc.path.join({root(), "chapters", stem .. ".qmd"})
      for id in (read(path) or ""):gmatch("%]%{%.claim%s+#(clm%-[%w%-_]+)%}") do
        if not numbers[id] then
          count = count + 1
          numbers[id] = count
        end
      end
    end
  end
  return numbers
end

-- Whether every case of a claim holds on the book's release in the ledger.
local function holds_here(ledger, id)
  if not ledger or not ledger.claims then
    return false
  end
  local found = false
  for key, claim in pairs(ledger.claims) do
    if key == id or key:sub(1, #id + 1) == id .. "[" then
      local row = (claim.results or {})[ledger.lock]
      if not row or row.status ~= "holds" then
        return false
      end
      found = true
    end
  end
  return found
end

local numbers, ledger = nil, nil

local function load()
  if numbers == nil then
    numbers = claim_numbers()
    -- pandoc.json arrived in pandoc 3.1 (Quarto's); quarto.json stands in under older pandocs
    local decode = (pandoc.json and pandoc.json.decode) or (quarto and quarto.json and quarto.json.decode)
    local ok, decoded = false, nil
    if decode then
      ok, decoded = pcall(decode, read(pandoc.path.join({root(), "data", "ledger.json"})) or "")
    end
    ledger = ok and type(decoded) == "table" and decoded or nil
  end
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
  load()
  local label = "claim " .. tostring(numbers[el.identifier] or "?")
  local holds = holds_here(ledger, el.identifier)
  local link = pandoc.Link(
    {pandoc.Str((holds and "✓ " or "") .. label)},
    appendix() .. "#ev-" .. el.identifier,
    "",
    pandoc.Attr("", {"claim-mark"}, {
      ["aria-label"] = label .. (holds and ", holds on this build" or "")
        .. ": its evidence in the Claims appendix",
    })
  )
  el.content:insert(pandoc.Space())
  el.content:insert(link)
  return el
end
