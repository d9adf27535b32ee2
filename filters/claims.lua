-- A claim of the book, [the sentence]{.claim #clm-...}, is one click from its evidence: after the
-- sentence, a small "test" mark links to the claim's row in the Claims appendix
-- (chapters/claims.qmd), which names its test and its status on every release of the ledger.
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
    "The test that asserts this sentence, and the releases it holds on",
    pandoc.Attr("", {"claim-evidence"})
  )
  el.content:insert(pandoc.Superscript({link}))
  return el
end
