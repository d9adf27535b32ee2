-- Under every chapter's title: a link to the chapter's executed notebook, written beside the page by the
-- post-render step (`python -m jitbook.book site`), and, when the page ran at the small problem sizes
-- (JITBOOK_SMALL=1), a note saying so: its numbers are not the full-size ones.
local function small()
  local value = string.lower(os.getenv("JITBOOK_SMALL") or "0")
  return value == "1" or value == "true"
end

function Pandoc(doc)
  local input = quarto.doc.input_file or ""
  if not quarto.doc.is_format("html") then
    return doc
  end
  local is_chapter = input:match("[/\\]chapters[/\\][^/\\]+%.qmd$") ~= nil
  local blocks = {}
  if is_chapter then
    local stem = pandoc.path.split_extension(pandoc.path.filename(input))
    local link = pandoc.Link({pandoc.Str("Download this chapter as a Jupyter notebook")},
                             "../notebooks/" .. stem .. ".ipynb", "",
                             pandoc.Attr("", {}, {download = stem .. ".ipynb"}))
    table.insert(blocks, pandoc.Div({pandoc.Para({link})}, pandoc.Attr("", {"notebook-link"})))
  end
  if small() then
    local note = pandoc.Para(pandoc.Inlines(
      "This page ran at the small problem sizes (JITBOOK_SMALL=1): its numbers are not the full-size ones."))
    table.insert(blocks, pandoc.Div({note}, pandoc.Attr("", {"callout-note", "problem-size"})))
  end
  -- After the page's level-1 heading, which Quarto takes as the page title.
  local at = 1
  if doc.blocks[1] and doc.blocks[1].t == "Header" and doc.blocks[1].level == 1 then
    at = 2
  end
  for i = #blocks, 1, -1 do
    doc.blocks:insert(at, blocks[i])
  end
  return doc
end
