-- Reference material folded on the site: a div `::: {.fold summary="..."}` (or one opening with a
-- heading, which becomes the summary) becomes a <details> whose
-- summary line is all a reader sees until they open it, so a chapter reads as its lesson and the
-- measured tables and checklists stay one click away. A link into a fold (a claim's "back", a
-- cross-reference) opens it: browsers expand a closed <details> holding the target, and the script
-- below does it where they do not. The PDF and the notebooks print a fold open.

local SCRIPT = [[
<script>
(() => {
  const open = () => {
    const target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (!target) return;
    let opened = false;
    for (let fold = target.closest("details.jitbook-fold"); fold; fold = fold.parentElement.closest("details.jitbook-fold")) {
      opened = opened || !fold.open;
      fold.open = true;
    }
    if (opened) target.scrollIntoView();
  };
  window.addEventListener("hashchange", open);
  document.addEventListener("DOMContentLoaded", open);
})();
</script>
]]

local used = false

-- The summary line: the fold's leading heading (which the PDF keeps as a heading), else its
-- `summary` attribute, as Markdown.
local function summary_of(div)
  local first = div.content[1]
  if first and first.t == "Header" then
    div.content:remove(1)
    return pandoc.write(pandoc.Pandoc({pandoc.Plain(first.content)}), "html")
  end
  local text = div.attributes["summary"]
  assert(text and text ~= "", "a ::: {.fold} div needs a heading first or summary=\"what it holds\"")
  return pandoc.write(pandoc.read(text, "markdown"), "html"):gsub("^<p>", ""):gsub("</p>%s*$", "")
end

function Div(div)
  if not div.classes:includes("fold") or not quarto.doc.is_format("html") then
    return nil
  end
  used = true
  local blocks = pandoc.List({pandoc.RawBlock("html",
    '<details class="jitbook-fold"><summary>' .. summary_of(div) .. "</summary>")})
  blocks:extend(div.content)
  blocks:insert(pandoc.RawBlock("html", "</details>"))
  return blocks
end

function Pandoc(doc)
  if used then
    doc.blocks:insert(pandoc.RawBlock("html", SCRIPT))
  end
  return doc
end
