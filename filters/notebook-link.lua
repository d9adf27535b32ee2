-- Under every chapter's title: a link to the chapter's executed notebook, written beside the page by the
-- post-render step (`python -m jitbook.site site`), and, when the page ran at the small problem sizes
-- (JITBOOK_SMALL=1), a note saying so: its numbers are not the full-size ones.
local function small()
  local value = string.lower(os.getenv("JITBOOK_SMALL") or "0")
  return value == "1" or value == "true"
end

-- Solutions are folded on the page: drop their nbgrader marker lines from the code shown and mark
-- the cell. Quarto 1.7 still indexes its text, so the post-render step (jitbook.site.post_render.unsearchable)
-- takes the solutions out of search.json.
local BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"

local function without_markers(text)
  local kept = {}
  for line in (text .. "\n"):gmatch("(.-)\n") do
    local bare = line:match("^%s*(.-)%s*$")
    if bare ~= BEGIN and bare ~= END then
      table.insert(kept, line)
    end
  end
  return table.concat(kept, "\n")
end

-- Inline math followed by punctuation ("$x$:") stays on the line with it: a phone's narrow column
-- would otherwise start a line with a lone ":".
function Inlines(inlines)
  local out = pandoc.Inlines({})
  local i = 1
  while i <= #inlines do
    local el, after = inlines[i], inlines[i + 1]
    if el.t == "Math" and el.mathtype == "InlineMath" and after and after.t == "Str"
        and after.text:match("^[%.,;:%)!%?]") then
      out:insert(pandoc.Span({el, after}, pandoc.Attr("", {"nowrap"})))
      i = i + 2
    else
      out:insert(el)
      i = i + 1
    end
  end
  return out
end

-- The preface is unnumbered, so Quarto writes a reference into it as "Section 5" (HTML) or
-- "?@sec-..." (Typst): a reference to one of its sections is written as the section's title,
-- linked, as the prose links other pages.
local PREFACE = "index.qmd"
local preface_titles = nil

local function read_preface_titles()
  local titles = {}
  local dir = (quarto.project and quarto.project.directory) or "."
  local file = io.open(pandoc.path.join({dir, PREFACE}), "r")
  if not file then
    return titles
  end
  for line in file:lines() do
    local text, label = line:match("^#+%s+(.-)%s*{#(sec%-[%w%-_]+)[^}]*}%s*$")
    if label then
      titles[label] = pandoc.read(text, "markdown").blocks[1].content
    end
  end
  file:close()
  return titles
end

local function in_preface()
  local input = quarto.doc.input_file or ""
  return pandoc.path.filename(input) == PREFACE
end

function Cite(cite)
  preface_titles = preface_titles or read_preface_titles()
  if #cite.citations ~= 1 then
    return nil
  end
  local label = cite.citations[1].id
  local title = preface_titles[label]
  if not title then
    return nil
  end
  local target = "#" .. label
  if quarto.doc.is_format("html") and not in_preface() then
    target = "../index.html#" .. label
  end
  local words = pandoc.Inlines({pandoc.Str("“")})
  words:extend(title)
  words:insert(pandoc.Str("”"))
  return pandoc.Link(words, target)
end

-- Phones get the page's contents at its top (Quarto shows its contents in the margin, which a
-- narrow screen hides): the level-2 sections, folded.
local function page_contents(doc)
  local items = {}
  for _, block in ipairs(doc.blocks) do
    if block.t == "Header" and block.level == 2 and block.identifier ~= ""
        and not block.classes:includes("unlisted") then
      table.insert(items, {pandoc.Plain({pandoc.Link(block.content, "#" .. block.identifier)})})
    end
  end
  if #items < 2 then
    return nil
  end
  return pandoc.Div({
    pandoc.RawBlock("html", "<details><summary>On this page</summary>"),
    pandoc.BulletList(items),
    pandoc.RawBlock("html", "</details>"),
  }, pandoc.Attr("", {"jitbook-page-toc"}))
end

function Div(div)
  if not div.classes:includes("cell") then
    return nil
  end
  local solution = false
  div = div:walk({CodeBlock = function(block)
    if block.text:find(BEGIN, 1, true) then
      solution = true
      block.text = without_markers(block.text)
      return block
    end
  end})
  if solution then
    div.classes:insert("quarto-exclude-from-search-index")
    return div
  end
end

-- The wheel the post-render step writes beside the notebooks (jitbook.site.wheel), named by pyproject's version.
local function wheel_name()
  local dir = (quarto.project and quarto.project.directory) or "."
  local file = io.open(pandoc.path.join({dir, "pyproject.toml"}), "r")
  if not file then
    return nil
  end
  local version = file:read("a"):match('\nversion = "([^"]+)"')
  file:close()
  return version and ("jitbook-" .. version .. "-py3-none-any.whl") or nil
end

-- The site's public address (`site-url` under `book:` in _quarto.yml), or nil for a site read where it was built.
function site_url(doc)
  local book = doc.meta.book
  local url = book and book["site-url"] and pandoc.utils.stringify(book["site-url"]) or ""
  return url ~= "" and url or nil
end

-- Colab opens notebooks from GitHub: a site published with `quarto publish gh-pages` at
-- https://OWNER.github.io/REPO/ has its notebooks on the gh-pages branch of OWNER/REPO. Other hosts: no link.
function colab_url(url, stem)
  local owner, repo = (url or ""):match("^https://([%w%-]+)%.github%.io/([%w%-%._]+)")
  if not owner then
    return nil
  end
  return "https://colab.research.google.com/github/" .. owner .. "/" .. repo
    .. "/blob/gh-pages/notebooks/" .. stem .. ".ipynb"
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
    -- `data-noresolveinput`: Quarto resolves every page link against the project's inputs and would warn
    -- that this notebook, which the post-render step writes afterwards, does not exist yet.
    local link = pandoc.Link({pandoc.Str("Download this chapter as a Jupyter notebook")},
                             "../notebooks/" .. stem .. ".ipynb", "",
                             pandoc.Attr("", {}, {download = stem .. ".ipynb", ["data-noresolveinput"] = "1"}))
    local line = pandoc.Inlines({link})
    local wheel = wheel_name()
    if wheel then
      -- The notebook's first cell installs the package from this file when it lies beside it.
      line:extend({pandoc.Str(" (its first cell installs "), pandoc.Link({pandoc.Code("jitbook")},
        "../notebooks/" .. wheel, "", pandoc.Attr("", {}, {download = wheel, ["data-noresolveinput"] = "1"})),
        pandoc.Str(" from the folder beside it")})
      line:insert(pandoc.Str(site_url(doc) and " or from this site)" or ")"))
    end
    local colab = colab_url(site_url(doc), stem)
    if colab then
      line:extend({pandoc.Str(" · "), pandoc.Link({pandoc.Str("Open in Colab")}, colab)})
    end
    table.insert(blocks, pandoc.Div({pandoc.Para(line)}, pandoc.Attr("", {"notebook-link"})))
  end
  local contents = page_contents(doc)
  if contents then
    table.insert(blocks, contents)
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
