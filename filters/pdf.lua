-- The PDF edition (`make pdf`, Typst): the book's anchors and claim marks work inside the PDF, and a
-- PDF made at the small problem sizes says so on its title page. Quarto renders the whole book as one
-- Typst document, so this filter sees every page at once. The site is claims.lua's and
-- notebook-link.lua's.

-- An empty anchor, []{#...} (a table row of the appendices), is a Typst label with nothing before it
-- ("label is not attached to anything"), so a link to it goes nowhere: it labels an invisible
-- metadata element instead, which a link can land on.
local function anchor(span)
  if span.identifier == "" or #span.content > 0 then
    return nil
  end
  return pandoc.RawInline("typst", "#metadata(none)<" .. span.identifier .. ">")
end

-- The anchors the document holds (spans and divs), so a mark never links to a row that is not
-- there (a link to a missing label stops Typst).
local function anchors(doc)
  local found = {}
  local function note(el)
    if el.identifier ~= "" then
      found[el.identifier] = true
    end
  end
  doc:walk({Span = note, Div = note})
  return found
end

local function small()
  local value = string.lower(os.getenv("JITBOOK_SMALL") or "0")
  return value == "1" or value == "true"
end

SMALL_NOTE = "Built at the small problem sizes (JITBOOK_SMALL=1): its numbers are not the full-size ones"

function Pandoc(doc)
  if not quarto.doc.is_format("typst") then
    return nil
  end
  local present = anchors(doc)
  doc = doc:walk({Span = function(span)
    if span.classes:includes("claim") and present["ev-" .. span.identifier] then
      -- as on the site: a small mark after the sentence, linking to its evidence in the Claims
      -- appendix, which links back here
      span.content:insert(pandoc.Superscript({pandoc.Link({pandoc.Str("claim")}, "#ev-" .. span.identifier)}))
      return span
    end
    return anchor(span)
  end})
  if small() then
    local subtitle = doc.meta.subtitle and pandoc.utils.stringify(doc.meta.subtitle) or ""
    doc.meta.subtitle = pandoc.MetaInlines(pandoc.Inlines(
      (subtitle ~= "" and (subtitle .. ". ") or "") .. SMALL_NOTE .. "."))
  end
  return doc
end
