"""Only the CSS rules that the site can use: the rest of every stylesheet is dropped after the build.

The theme's stylesheets carry all of Bootstrap and every component of four extensions; the pages use
a small part (pydata-sphinx-theme.css alone was 305 kB on every page). What a page can use is read
from the built site, the way PurgeCSS does it:

* **the names a page can carry**: every tag, attribute name, class and id in the built HTML, and
  every word of the scripts the pages run (their files and inline ``<script>``\\ s): that is where
  the classes added at run time come from (the theme's drawers, dark mode, search, tooltips and
  dropdowns; ours: skip links, head viewers, scroll cues). A class a script builds from parts
  (Bootstrap's ``bs-${name}-auto``) is named in :data:`BUILT_BY_SCRIPTS`;
* **a selector is kept** when each tag, class, id and attribute it names is among them. States are
  not names: pseudo-classes and pseudo-elements (``:hover``, ``::before``) and what stands inside a
  functional one (``:not(.x)``, ``:is()``, ``:has()``) are not required, so a rule for a state a
  reader can reach stays;
* **a rule** keeps its kept selectors, or goes; ``@media``, ``@supports``, ``@layer`` and
  ``@container`` are purged inside and go when empty; ``@keyframes`` and ``@font-face`` stay when a
  kept declaration names them; a custom property (``--x``) that nothing reads (``var(--x)`` in the
  kept CSS, a page or a script) goes; licence comments (``/*! ... */``) stay, other comments and
  whitespace go.

Each page's link to a purged stylesheet gets the purged file's own version (``?v=`` its hash): a
browser that cached an older cut of it fetches the new one.

Sphinx copies the original stylesheets only when it writes pages, so the originals are kept in
``ORIGINALS`` beside the site (``_build/css-full``): every build purges from them, never from a
purged file, and a page that starts using a class gets its rules back. tests/test_site.py serves
them to compare, in a browser, every element's computed style with the full and the purged CSS.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import tinycss2
from tinycss2.serializer import serialize_identifier

ORIGINALS = "css-full"           # beside the site's folder: _build/css-full/<path in the site>
MANIFEST = "purged.json"         # in ORIGINALS: path -> sha256 of the purged file this step wrote
#: Classes that scripts build from parts, so no word of theirs names them whole.
BUILT_BY_SCRIPTS = {"bs-tooltip-auto", "bs-popover-auto"}    # bootstrap.js: `bs-${NAME}-auto`
GROUPING = {"media", "supports", "layer", "container", "document"}   # at-rules that hold rules
_WORD = re.compile(r"-{0,2}[A-Za-z_][\w-]*")
_VAR = re.compile(r"var\(\s*(--[\w-]+)")


@dataclass
class Names:
    """What the site's pages can carry: from the HTML exactly, from the scripts every word."""
    tags: set[str] = field(default_factory=set)
    attributes: set[str] = field(default_factory=set)
    classes: set[str] = field(default_factory=set)
    ids: set[str] = field(default_factory=set)
    words: set[str] = field(default_factory=lambda: set(BUILT_BY_SCRIPTS))
    scripts: set[Path] = field(default_factory=set)
    styles: list[str] = field(default_factory=list)    # inline style attributes and <style>s

    def has(self, kind: str, name: str) -> bool:
        found = {"tag": self.tags, "attribute": self.attributes, "class": self.classes, "id": self.ids}[kind]
        return name in found or name in self.words or (kind in ("tag", "attribute") and name.lower() in found)


class _PageScan(HTMLParser):
    def __init__(self, names: Names, page: Path):
        super().__init__(convert_charrefs=True)
        self.names, self.page, self.inside = names, page, None

    def handle_starttag(self, tag, attrs):
        n = self.names
        n.tags.add(tag)
        for key, value in attrs:
            n.attributes.add(key)
            if key == "class" and value:
                n.classes.update(value.split())
            elif key == "id" and value:
                n.ids.add(value)
            elif key == "style" and value:
                n.styles.append(value)
            elif key.startswith("on") and value:
                n.words.update(_WORD.findall(value))
        src = dict(attrs).get("src") if tag == "script" else None
        if src and not urlsplit(src).scheme:
            n.scripts.add((self.page.parent / unquote(urlsplit(src).path)).resolve())
        self.inside = tag if tag in ("script", "style") else None

    def handle_endtag(self, tag):
        self.inside = None

    def handle_data(self, data):
        if self.inside == "script":
            self.names.words.update(_WORD.findall(data))
        elif self.inside == "style":
            self.names.styles.append(data)


def site_names(site: Path) -> Names:
    """The names used by every HTML page of ``site`` and by the scripts they load."""
    names = Names()
    for page in sorted(site.rglob("*.html")):
        _PageScan(names, page).feed(page.read_text(encoding="utf-8", errors="replace"))
    for script in sorted(names.scripts):
        if script.is_file():
            names.words.update(_WORD.findall(script.read_text(encoding="utf-8", errors="replace")))
    return names


# --- selectors ---------------------------------------------------------------------------------
def _required(tokens) -> list[tuple[str, str]]:
    """(kind, name) of every tag, class, id and attribute a compound selector names, outside
    pseudo-classes and pseudo-elements (and their arguments)."""
    out, previous = [], None
    for token in tokens:
        kind = token.type
        if kind == "ident" and previous == ".":
            out.append(("class", token.value))
        elif kind == "ident" and previous not in (":", "::"):
            out.append(("tag", token.value))
        elif kind == "hash":
            out.append(("id", token.value))
        elif kind == "[] block":
            attribute = next((t for t in token.content if t.type == "ident"), None)
            if attribute is not None:
                out.append(("attribute", attribute.value))
        previous = ("::" if previous == ":" and token == ":" else token.value) if kind == "literal" else kind
    return out


def _split(prelude) -> list[list]:
    """A selector list's tokens, one list per selector (split at top-level commas)."""
    parts: list[list] = [[]]
    for token in prelude:
        if token == ",":
            parts.append([])
        else:
            parts[-1].append(token)
    return parts


def _text(tokens) -> str:
    """Tokens as CSS text with every run of whitespace as one space (inside blocks too)."""
    out = []
    for token in tokens:
        if token.type in ("whitespace", "comment"):
            if out and out[-1] != " ":
                out.append(" ")
            continue
        if token.type in ("() block", "[] block", "{} block"):
            opening = {"() block": "(", "[] block": "[", "{} block": "{"}[token.type]
            out.append(opening + _text(token.content) + {"(": ")", "[": "]", "{": "}"}[opening])
        elif token.type == "function":
            out.append(serialize_identifier(token.name) + "(" + _text(token.arguments) + ")")
        else:
            out.append(token.serialize())
    return "".join(out).strip()


def _declarations(content) -> list[tuple[str, str]] | None:
    """(name, 'name:value[!important]') of a rule's declarations; None when it nests rules (CSS
    nesting: such a rule is kept as it is)."""
    out = []
    for decl in tinycss2.parse_blocks_contents(content, skip_comments=True, skip_whitespace=True):
        if decl.type in ("qualified-rule", "at-rule"):
            return None
        if decl.type == "declaration":
            value = _text(decl.value) + ("!important" if decl.important else "")
            out.append((decl.name if decl.name.startswith("--") else decl.lower_name, f"{decl.name}:{value}"))
    return out


# --- rules -------------------------------------------------------------------------------------
@dataclass
class _Rule:
    """A kept style rule: its selectors and its declarations (name, text)."""
    selectors: str
    declarations: list[tuple[str, str]]


def _purge_rules(rules, names: Names) -> list:
    """The kept rules of a rule list, as _Rule, (at-rule prelude, [kept rules]) or raw CSS text."""
    kept: list = []
    for rule in rules:
        if rule.type == "qualified-rule":
            selectors = [s for s in _split(rule.prelude) if all(names.has(*r) for r in _required(s))]
            if selectors:
                text, declarations = ",".join(_text(s) for s in selectors), _declarations(rule.content)
                kept.append(_Rule(text, declarations) if declarations is not None
                            else f"{text}{{{_text(rule.content)}}}\n")
        elif rule.type == "comment" and rule.value.startswith("!"):
            kept.append(f"/*{rule.value}*/\n")
        elif rule.type == "at-rule" and rule.lower_at_keyword in GROUPING and rule.content is not None:
            inner = _purge_rules(tinycss2.parse_rule_list(rule.content, skip_comments=True,
                                                          skip_whitespace=True), names)
            if inner:
                kept.append((f"@{rule.at_keyword} {_text(rule.prelude)}".rstrip(), inner))
        elif rule.type == "at-rule":
            kept.append(rule)      # @charset, @import, @font-face, @keyframes, @page...: judged later
    return kept


def _walk(kept):
    for item in kept:
        if isinstance(item, tuple):
            yield from _walk(item[1])
        else:
            yield item


def _unread_properties(sheets: list[list], names: Names, outside: str) -> set[str]:
    """Custom properties that no kept declaration, page or script reads (to a fixed point: a
    property read only by an unread one is unread too)."""
    defined: dict[str, list[str]] = {}
    read_elsewhere = set(_VAR.findall(outside)) | {w for w in names.words if w.startswith("--")}
    for sheet in sheets:
        for rule in _walk(sheet):
            if isinstance(rule, _Rule):
                for name, text in rule.declarations:
                    if name.startswith("--"):
                        defined.setdefault(name, []).append(text)
                    else:
                        read_elsewhere.update(_VAR.findall(text))
            else:       # kept whole: a rule that nests rules, an at-rule (@font-face, @keyframes...)
                read_elsewhere.update(_VAR.findall(rule if isinstance(rule, str) else tinycss2.serialize([rule])))
    read = set(read_elsewhere)
    frontier = list(read)
    while frontier:
        for text in defined.get(frontier.pop(), []):
            for name in _VAR.findall(text):
                if name not in read:
                    read.add(name)
                    frontier.append(name)
    return set(defined) - read


def _named_at_rules(sheets: list[list]) -> set[str]:
    """Every word in the kept declarations: an animation or font family a kept rule names."""
    words = set()
    for sheet in sheets:
        for rule in _walk(sheet):
            texts = [t for _, t in rule.declarations] if isinstance(rule, _Rule) else [rule] if isinstance(rule, str) else []
            for text in texts:
                words.update(w.strip("'\"") for w in re.findall(r"[\w-]+|'[^']*'|\"[^\"]*\"", text))
    return words


def _at_rule_text(rule, named: set[str]) -> str:
    keyword = rule.lower_at_keyword
    if keyword == "keyframes" or keyword.endswith("-keyframes"):
        if _text(rule.prelude).strip("'\"") not in named:
            return ""
    elif keyword == "font-face":
        family = next((v for n, v in _declarations(rule.content) or [] if n == "font-family"), "")
        if family.split(":", 1)[-1].strip("'\" ") not in named:
            return ""
    if rule.content is None:
        return f"@{rule.at_keyword} {_text(rule.prelude)};\n"
    return f"@{rule.at_keyword} {_text(rule.prelude)}".rstrip() + "{" + _text(rule.content) + "}\n"


def _write(kept, unread: set[str], named: set[str]) -> str:
    out = []
    for item in kept:
        if isinstance(item, _Rule):
            body = ";".join(text for name, text in item.declarations if name not in unread)
            if body:
                out.append(f"{item.selectors}{{{body}}}\n")
        elif isinstance(item, tuple):
            inner = _write(item[1], unread, named)
            if inner:
                out.append(f"{item[0]}{{\n{inner}}}\n")
        elif isinstance(item, str):
            out.append(item)
        else:
            out.append(_at_rule_text(item, named))
    return "".join(out)


def purge(sheets: dict[str, str], names: Names) -> dict[str, str]:
    """Each stylesheet (name -> CSS) with only the rules that ``names`` can use. The sheets are
    purged together: a custom property defined in one is read in another."""
    kept = {name: _purge_rules(tinycss2.parse_stylesheet(css, skip_comments=False, skip_whitespace=True), names)
            for name, css in sheets.items()}
    unread = _unread_properties(list(kept.values()), names, "\n".join(names.styles))
    named = _named_at_rules(list(kept.values())) | names.words    # a script may start an animation
    return {name: _ascii(_write(rules, unread, named)) for name, rules in kept.items()}


def _ascii(css: str) -> str:
    """Non-ASCII characters as CSS escapes: the file reads the same whatever encoding it is read in
    (tinycss2 gives ``content: "\\203A"`` back as the character itself)."""
    return re.sub(r"[^\x00-\x7f]", lambda m: f"\\{ord(m[0]):x} ", css)


# --- the site ----------------------------------------------------------------------------------
def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _link_versions(site: Path, versions: dict[str, str]) -> None:
    """Point every page's <link> to each stylesheet at its current version (``?v=``)."""
    link = re.compile(r'(href="(?:\.\./)*(' + "|".join(map(re.escape, versions)) + r'))(?:\?[^"]*)?"')
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        relinked = link.sub(lambda m: f'{m[1]}?v={versions[m[2]]}"', text)
        if relinked != text:
            page.write_text(relinked, encoding="utf-8")


def purge_site(site: Path) -> tuple[int, int]:
    """Purge every stylesheet of the built ``site`` in place, from the originals kept beside it;
    returns the stylesheets' total size (bytes) before and after."""
    originals = site.parent / ORIGINALS
    manifest_path = originals / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    sheets = {}
    for path in sorted(site.rglob("*.css")):
        rel = path.relative_to(site).as_posix()
        data = path.read_bytes()
        kept = originals / rel
        if manifest.get(rel) != _sha(data) or not kept.is_file():   # Sphinx copied a fresh original
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_bytes(data)
        sheets[rel] = kept.read_text(encoding="utf-8")
    purged = purge(sheets, site_names(site))
    for rel, css in purged.items():
        path = site / rel
        data = css.encode("utf-8")
        if path.read_bytes() != data:
            path.write_bytes(data)
        path.with_name(path.name + ".map").unlink(missing_ok=True)    # maps the original, not this
        manifest[rel] = _sha(data)
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    _link_versions(site, {rel: manifest[rel][:8] for rel in purged})
    return (sum(len(css.encode()) for css in sheets.values()),
            sum(len(css.encode()) for css in purged.values()))
