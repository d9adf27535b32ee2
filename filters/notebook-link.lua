-- Add "Download this chapter as a Jupyter notebook" to the top of every chapter page.
-- The notebooks are written by `python -m jitbook.book run --all` and copied next to the pages by `make book`.
function Pandoc(doc)
  local input = quarto.doc.input_file
  if not input:match("[/\\]chapters[/\\][^/\\]+%.qmd$") or not quarto.doc.is_format("html") then
    return doc
  end
  local stem = pandoc.path.split_extension(pandoc.path.filename(input))
  local link = pandoc.Link({pandoc.Str("Download this chapter as a Jupyter notebook")},
                           "../notebooks/" .. stem .. ".ipynb", "", {download = stem .. ".ipynb"})
  doc.blocks:insert(1, pandoc.Div({pandoc.Para({link})}, pandoc.Attr("", {"notebook-link"})))
  return doc
end
