-- Add "Download this chapter as a Jupyter notebook" to the top of every chapter page.
-- The notebooks are written by `python -m jitbook.book run --all` and copied next to the pages by `make book`.
function Pandoc(doc)
  local input = quarto.doc.input_file or ""
  if not input:match("[/\\]chapters[/\\][^/\\]+%.qmd$") or not quarto.doc.is_format("html") then
    return doc
  end
  local stem = pandoc.path.split_extension(pandoc.path.filename(input))
  local link = pandoc.Link({pandoc.Str("Download this chapter as a Jupyter notebook")},
                           "../notebooks/" .. stem .. ".ipynb", "",
                           pandoc.Attr("", {}, {download = stem .. ".ipynb"}))
  -- After the chapter's level-1 heading, which Quarto takes as the page title.
  local at = 1
  if doc.blocks[1] and doc.blocks[1].t == "Header" and doc.blocks[1].level == 1 then
    at = 2
  end
  doc.blocks:insert(at, pandoc.Div({pandoc.Para({link})}, pandoc.Attr("", {"notebook-link"})))
  return doc
end
