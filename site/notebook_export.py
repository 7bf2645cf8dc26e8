"""Turn an executed MyST notebook into a plain Jupyter notebook for the site's .ipynb download.

myst-nb writes each chapter, executed and with its outputs, to ``_build/jupyter_execute/``; its
Markdown cells are still MyST (``{glue:text}`` roles, ``:::{admonition}`` fences, quiz answers in
the open). :func:`export_notebook` rewrites them as Markdown that Jupyter renders:

* glue roles become the glued values (formatted as on the site), cross-reference roles their text
  (``{numref}`` the figure's number, "Fig. 5.2", as on the site); glued figures and ``{figure}``
  images become cell attachments;
* a figure that ``mha_book.plotting.show`` gave a caption gets it, numbered, in a Markdown cell
  under its code cell (read from the SVG's metadata, :func:`svg_metadata`);
* admonitions become block quotes headed by their title; dropdowns (quiz answers) become
  ``<details>`` that stay closed until clicked, named after the question that opens with a bold
  label ("Answer to Quiz 2", :func:`answer_title`, as on the site); ``{include}`` pulls the
  included file in;
* ``(label)=`` targets become HTML anchors, so same-page references still jump;
* ``from myst_nb import glue`` gets a fallback, so the notebook runs without myst-nb;
* plumbing cells (tagged ``remove-cell``) and folded cells keep their code, collapsed.

Pure functions on dicts (nbformat's JSON), no Sphinx: the site test imports this module too.
"""
from __future__ import annotations

import base64
import copy
import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

GLUE_PREFIX = "application/papermill.record/"
IMAGE_TYPES = {"image/png": ".png", "image/jpeg": ".jpg", "image/svg+xml": ".svg"}
GLUE_IMPORT = "from myst_nb import glue"
GLUE_FALLBACK = """\
try:
    from myst_nb import glue
except ImportError:  # outside the site build: glue() shows a value only when asked to
    def glue(name, value, display=True):
        if display:
            from IPython.display import display as show
            show(value)"""

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>:{3,}|`{3,})\{(?P<name>[\w:.-]+)\}[ \t]*(?P<arg>.*)$")
_ROLE = re.compile(r"\{(?P<name>[\w:.-]+)\}`(?P<body>[^`]*)`")
_TARGET = re.compile(r"^\((?P<label>[\w.:-]+)\)=\s*$")
_TITLED = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.S)
_BOLD_OPENER = re.compile(r"^\*\*(?P<label>[^*]+?)[.:]?\*\*")
_AGENT = re.compile(r"<cc:Agent>.*?</cc:Agent>", re.S)      # its dc:title names the program
_SVG_FIELD = {key: re.compile(rf"<dc:{key}>(.*?)</dc:{key}>", re.S) for key in ("title", "description", "identifier")}


@dataclass(frozen=True)
class SvgMetadata:
    alt: str = ""
    caption: str = ""
    name: str = ""


def svg_metadata(svg: str) -> SvgMetadata:
    """The text alternative, caption and name that ``mha_book.plotting.show`` wrote into ``svg``
    (``dc:title``, ``dc:description``, ``dc:identifier``)."""
    svg = _AGENT.sub("", svg)
    found = {key: pattern.search(svg) for key, pattern in _SVG_FIELD.items()}
    text = {key: html.unescape(m.group(1)).strip() if m else "" for key, m in found.items()}
    return SvgMetadata(text["title"], text["description"], text["identifier"])


def answer_title(title: str, label: str | None) -> str:
    """A dropdown's title after a question that opens with a bold label: "Answer" after
    "**Quiz 2.** ..." is "Answer to Quiz 2" (six toggles all named "Answer" say nothing)."""
    return f"{title} to {label}" if label else title


def glue_values(nb: dict, glue_json: dict | None = None) -> dict[str, dict]:
    """The mime bundles glued in a notebook, by name: from the ``<doc>.glue.json`` that myst-nb
    writes next to the executed notebook (it strips glue outputs from the notebook itself), and
    from any glue outputs still in ``nb``."""
    values = {name: out.get("data", {}) for name, out in (glue_json or {}).items()}
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                values[name] = {k.removeprefix(GLUE_PREFIX): v for k, v in out.get("data", {}).items()}
    return values


def _plain(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


class MarkdownExporter:
    """MyST Markdown -> CommonMark + HTML that Jupyter renders.

    ``glue``: name -> mime bundle; ``resolve_ref(label)`` -> (text, href or None);
    ``resolve_doc(target)`` -> title; ``base`` is the folder that ``{include}`` paths start from;
    ``figures``: a figure's name -> its number as the site prints it ("Fig. 5.2").
    """

    def __init__(self, glue: dict, resolve_ref: Callable, resolve_doc: Callable, base: Path,
                 figures: dict[str, str] | None = None):
        from myst_nb.core.variables import format_plain_text  # the formatting the site uses

        self.glue, self.resolve_ref, self.resolve_doc, self.base = glue, resolve_ref, resolve_doc, base
        self.figures = figures or {}
        self.question: str | None = None   # the bold label opening the last paragraph ("Quiz 2")
        self._format = format_plain_text
        self.anchors: set[str] = set()   # targets met so far (export_notebook makes two passes)
        self.attachments: dict[str, dict] = {}   # images of the cell being converted

    # -- roles --------------------------------------------------------------------------------
    def _glue_text(self, body: str) -> str:
        key, spec = body.rsplit(":", 1) if ":" in body else (body, "")
        bundle = self.glue.get(key.strip())
        if bundle is None or "text/plain" not in bundle:
            raise KeyError(f"glue key {key!r} not found in the executed notebook")
        return self._format(_plain(bundle["text/plain"]), spec)

    def _role(self, match: re.Match) -> str:
        name, body = match["name"], match["body"]
        titled = _TITLED.match(body)
        text, target = (titled["text"], titled["target"]) if titled else (None, body)
        if name.startswith("glue"):
            return self._glue_text(body)
        if name == "numref" and target.strip() in self.figures:
            number = self.figures[target.strip()]
            text = text.replace("{number}", number.split()[-1]).replace("%s", number.split()[-1]) if text else number
            return f"[{text}](#{target.strip()})"
        if name in ("ref", "numref"):
            label_text, href = self.resolve_ref(target.strip())
            href = f"#{target.strip()}" if target.strip() in self.anchors else href
            text = (text or label_text).replace("%s", "").replace("{number}", "").strip()
            return f"[{text}]({href})" if href else f"*{text}*"
        if name == "doc":
            return f"*{text or self.resolve_doc(target.strip())}*"
        if name == "math":
            return f"${body}$"
        if name == "eq":
            return f"({body})"
        return text if text is not None else body   # download, abbr, sub, ...: their text

    def roles(self, text: str) -> str:
        return _ROLE.sub(self._role, text)

    # -- block structure ----------------------------------------------------------------------
    def convert(self, source: str) -> str:
        """Markdown for one cell; its images are then in ``self.attachments``."""
        self.attachments = {}
        return "\n".join(self._blocks(source.split("\n"))).strip("\n")

    def _image(self, key: str, bundle: dict, caption: str, label: str | None) -> list[str]:
        """An image as a cell attachment (the notebook stays one self-contained file)."""
        out = [f'<a id="{label}"></a>', ""] if label else []
        mime = next((m for m in IMAGE_TYPES if m in bundle), None)
        if mime is None:                      # not an image: show its HTML or its text
            body = bundle.get("text/html") or bundle.get("text/plain") or ""
            return out + _plain(body).split("\n") + ([f"*{caption}*"] if caption else [])
        name = f"{key}{IMAGE_TYPES[mime]}"
        self.attachments[name] = {mime: bundle[mime]}
        return out + [f"![{caption or key}](attachment:{name})", ""] + ([f"*{caption}*"] if caption else [])

    def _file_image(self, path: Path) -> dict:
        mime = {v: k for k, v in IMAGE_TYPES.items()}.get(path.suffix.lower())
        if mime is None or not path.is_file():
            return {}
        data = path.read_text(encoding="utf-8") if mime == "image/svg+xml" else \
            base64.b64encode(path.read_bytes()).decode("ascii")
        return {mime: data}

    def _blocks(self, lines: list[str]) -> list[str]:
        out, i, in_code = [], 0, None
        while i < len(lines):
            line = lines[i]
            plain_fence = re.match(r"^ {0,3}(`{3,}|~{3,})", line)
            if in_code:            # inside an ordinary code block: copy verbatim
                out.append(line)
                if plain_fence and plain_fence[1][0] == in_code[0] and len(plain_fence[1]) >= len(in_code) \
                        and not line.strip().strip(in_code[0]):
                    in_code = None
                i += 1
                continue
            fence = _FENCE.match(line)
            if fence:
                end = self._closing(lines, i, fence["fence"])
                body = lines[i + 1:end]
                out.extend(self._directive(fence["name"], fence["arg"].strip(), body))
                i = end + 1
                continue
            if plain_fence:
                in_code = plain_fence[1]
                out.append(line)
            elif _TARGET.match(line):
                self.anchors.add(_TARGET.match(line)["label"])
                out.append(f'<a id="{_TARGET.match(line)["label"]}"></a>')
            elif line.startswith("%"):  # a MyST comment
                pass
            else:
                if line.strip() and (i == 0 or not lines[i - 1].strip()):   # a paragraph starts
                    opener = _BOLD_OPENER.match(line.strip())
                    self.question = opener["label"].strip() if opener else None
                out.append(self.roles(line))
            i += 1
        return out

    @staticmethod
    def _closing(lines: list[str], start: int, fence: str) -> int:
        char, depth = fence[0], 0
        for j in range(start + 1, len(lines)):
            stripped = lines[j].strip()
            if _FENCE.match(lines[j]) and _FENCE.match(lines[j])["fence"][0] == char:
                depth += 1
            elif stripped and set(stripped) == {char} and len(stripped) >= 3:
                if depth == 0 and len(stripped) >= len(fence):
                    return j
                depth = max(0, depth - 1)
        return len(lines)

    @staticmethod
    def _options(body: list[str]) -> tuple[dict, list[str]]:
        options, k = {}, 0
        while k < len(body) and re.match(r"^:[\w-]+:", body[k]):
            key, _, value = body[k][1:].partition(":")
            options[key] = value.strip()
            k += 1
        return options, body[k:]

    def _directive(self, name: str, arg: str, body: list[str]) -> list[str]:
        options, body = self._options(body)
        question = self.question      # (the blocks inside may open paragraphs of their own)
        if name == "include":
            path = self.base / arg
            return self._blocks(path.read_text(encoding="utf-8").split("\n"))
        if name in ("math", "code-cell"):
            return ["$$", *body, "$$"] if name == "math" else ["```python", *body, "```"]
        if name in ("code-block", "code"):
            return [f"```{arg}", *body, "```"]
        if name in ("glue", "glue:any", "glue:figure", "glue:math"):
            key = arg.strip()
            if key not in self.glue:
                raise KeyError(f"glue key {key!r} not found in the executed notebook")
            if options.get("name"):
                self.anchors.add(options["name"])
            return self._image(key, self.glue[key], self.roles(" ".join(body).strip()), options.get("name"))
        if name in ("figure", "image"):
            path = self.base / arg.strip()
            label = options.get("name")
            if label:
                self.anchors.add(label)
            return self._image(path.stem, self._file_image(path), self.roles(" ".join(body).strip()), label)
        inner = self._blocks(body)
        self.question = question
        title = self.roles(arg) or name.capitalize()
        if name == "dropdown":
            title = answer_title(title, question)
            return ["", f"<details><summary><b>{title}</b></summary>", "", *inner, "", "</details>", ""]
        kind = options.get("class", "").split()
        mark = "⚠ " if "warning" in kind or name in ("warning", "danger", "caution") else ""
        quoted = [f"> {ln}" if ln else ">" for ln in inner]
        return ["", f"> **{mark}{title}**", ">", *quoted, ""]


def figure_captions(cell: dict, figures: dict[str, str]) -> list[str]:
    """The numbered captions of the figures that a code cell's outputs show, as Markdown."""
    found = []
    for out in cell.get("outputs", []):
        svg = out.get("data", {}).get("image/svg+xml")
        meta = svg_metadata(_plain(svg)) if svg else None
        if meta and meta.caption:
            number = figures.get(meta.name)
            found.append(f'<a id="{meta.name}"></a>\n\n' + (f"*{number}* " if number else "") + meta.caption)
    return found


def _caption_cells(cell: dict, captions: list[str]) -> list[dict]:
    """Markdown cells for a code cell's figure captions, each with an id of its own (nbformat 4.5 needs one)."""
    return [{"id": f"{cell.get('id', 'cell')[:48]}-caption-{k}", "cell_type": "markdown", "metadata": {},
             "source": text} for k, text in enumerate(captions)]


def export_notebook(nb: dict, markdown: MarkdownExporter) -> dict:
    """A copy of the executed notebook ``nb`` that Jupyter shows as the site does."""
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:       # first pass: learn every anchor, so that references can jump
        if cell["cell_type"] == "markdown":
            markdown.convert(_plain(cell.get("source", "")))
    captions = {id(cell): figure_captions(cell, markdown.figures) for cell in nb["cells"]}
    nb["cells"] = [c for cell in nb["cells"] for c in [cell, *_caption_cells(cell, captions[id(cell)])]]
    for cell in nb["cells"]:
        source = _plain(cell.get("source", ""))
        if cell["cell_type"] == "markdown":
            cell["source"] = markdown.convert(source)
            if markdown.attachments:
                cell["attachments"] = markdown.attachments
            continue
        if cell["cell_type"] != "code":
            continue
        if GLUE_IMPORT in source:
            cell["source"] = source.replace(GLUE_IMPORT, GLUE_FALLBACK)
        # glue(..., display=False) leaves outputs that only myst-nb can read: drop them.
        cell["outputs"] = [o for o in cell.get("outputs", [])
                           if not any(k.startswith(GLUE_PREFIX) for k in o.get("data", {}))]
        tags = set(cell.get("metadata", {}).get("tags", []))
        if tags & {"remove-cell", "remove-input", "hide-input", "hide-cell"}:
            cell.setdefault("metadata", {}).setdefault("jupyter", {})["source_hidden"] = True
    nb.setdefault("metadata", {}).pop("mystnb", None)
    return nb


def leftover_myst(nb: dict) -> list[str]:
    """MyST syntax that survived an export (the site test expects none)."""
    found = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            text = _plain(cell["source"])
            found += [m.group(0) for m in _ROLE.finditer(text)]
            found += [ln for ln in text.split("\n") if _FENCE.match(ln) or _TARGET.match(ln)]
    return found
