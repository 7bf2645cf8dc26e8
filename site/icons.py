"""Replace the theme's Font Awesome bundle (1.5 MB of JavaScript, every free icon) by the icons the
site uses, and drop the theme stylesheet's 86 kB of webfont glyph rules that the SVGs make dead.

pydata-sphinx-theme loads ``_static/scripts/fontawesome.js`` on every page; it turns each
``<i class="fa-solid fa-download">`` into an inline SVG. After the build, this module rewrites that
file (same name, so no template changes) with the same job done for only the icon names found in
the site's HTML and scripts: a few kB instead of 1.5 MB. Icon data is read from the theme's own
bundle, so nothing is downloaded. The SVGs drop the pack classes (``fa-solid``...), whose CSS would
make the browser fetch the 150 kB icon webfont for nothing.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

BUNDLE = "_static/scripts/fontawesome.js"
THEME_CSS = "_static/styles/pydata-sphinx-theme.css"
# ".fa-download:before{content:"\f019"}": the webfont glyph of every icon (1,900 rules, 86 kB), dead
# once the icons are SVGs. Rules that draw theme icons through CSS variables are kept.
_GLYPH_RULE = re.compile(r'(?:\.fa-[a-z0-9-]+:(?:before|after),?)+\{content:"[^"]*"\}')
MARKER = "/* course_site icon subset */"
_PACK = re.compile(r'var p=\{(?P<body>.*?)\};.{0,400}?d\("(?P<pack>fa[srb])",p\)', re.S)
_ICON = re.compile(r'(?:"(?P<q>[\w-]+)"|(?P<n>[A-Za-z_]\w*)):\[(?P<w>\d+),(?P<h>\d+),\[[^\]]*\],"[0-9a-f]+","(?P<d>[^"]+)"\]')
_USED = re.compile(r"\bfa-([a-z0-9][a-z0-9-]*)")

_RUNTIME = r"""
(function () {
  var PACKS = { "fa-solid": "fas", fas: "fas", "fa-regular": "far", far: "far", "fa-brands": "fab", fab: "fab" };
  var NS = "http://www.w3.org/2000/svg";
  function icon(el) {
    var pack = "fas", name = null;
    el.classList.forEach(function (c) { if (PACKS[c]) { pack = PACKS[c]; } });
    el.classList.forEach(function (c) {
      var n = c.slice(3);
      if (!name && c.indexOf("fa-") === 0 && (ICONS[pack][n] || ICONS.fas[n])) { name = n; }
    });
    if (!name) { return; }
    var d = ICONS[pack][name] || ICONS.fas[name];
    var svg = document.createElementNS(NS, "svg");
    // Without the pack classes (fa-solid, ...), whose font-family rule would fetch a webfont.
    var keep = Array.prototype.filter.call(el.classList, function (c) { return !PACKS[c]; });
    svg.setAttribute("class", keep.concat(["svg-inline--fa"]).join(" "));
    // Its other attributes too: the theme shows one of the colour-mode button's three icons by
    // its data-mode (without it, all three stay display:none and the button is empty).
    Array.prototype.forEach.call(el.attributes, function (a) {
      if (a.name !== "class" && a.name !== "style") { svg.setAttribute(a.name, a.value); }
    });
    svg.setAttribute("viewBox", "0 0 " + d[0] + " " + d[1]);
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("focusable", "false");
    var path = document.createElementNS(NS, "path");
    path.setAttribute("fill", "currentColor");
    path.setAttribute("d", d[2]);
    svg.appendChild(path);
    el.replaceWith(svg);
  }
  function scan(root) {
    if (root.querySelectorAll) {
      Array.prototype.forEach.call(root.querySelectorAll("i[class*='fa-'], span[class*='fa-']"), icon);
    }
  }
  var css = document.createElement("style");
  // The <i> placeholders draw nothing before they are replaced (else their font glyph would make
  // the browser fetch the 150 kB webfont during the first layout).
  css.textContent = "i[class*='fa-']::before{content:none!important}" +
    ".svg-inline--fa{display:inline-block;height:1em;overflow:visible;vertical-align:-.125em}" +
    ".svg-inline--fa.fa-fw{width:1.25em}.svg-inline--fa.fa-lg{height:1.25em;vertical-align:-.2em}";
  document.head.appendChild(css);
  function start() {
    scan(document);
    new MutationObserver(function (records) {
      records.forEach(function (r) { r.addedNodes.forEach(function (n) { if (n.nodeType === 1) { scan(n.parentNode || n); } }); });
    }).observe(document.body, { childList: true, subtree: true });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
"""


def all_icons(bundle: str) -> dict[str, dict[str, list]]:
    """pack ('fas', 'far', 'fab') -> icon name -> [width, height, path] from the theme's bundle."""
    packs: dict[str, dict[str, list]] = {"fas": {}, "far": {}, "fab": {}}
    for pack in _PACK.finditer(bundle):
        for m in _ICON.finditer(pack["body"]):
            packs[pack["pack"]][m["q"] or m["n"]] = [int(m["w"]), int(m["h"]), m["d"]]
    return packs


def used_names(site: Path) -> set[str]:
    names = set()
    for path in [*site.rglob("*.html"), *site.glob("_static/**/*.js")]:
        if path.name != "fontawesome.js":
            names |= set(_USED.findall(path.read_text(encoding="utf-8", errors="replace")))
    return names


def theme_bundle() -> Path:
    """The theme's original bundle (the copy in the site may already be a subset)."""
    import pydata_sphinx_theme

    return (Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme" / "static"
            / "scripts" / "fontawesome.js")


def subset_theme_icons(site: Path) -> int:
    """Rewrite the theme's icon bundle in ``site`` with only the used icons; returns its size."""
    original = theme_bundle()
    packs = all_icons(original.read_text(encoding="utf-8"))
    if not packs["fas"]:
        raise RuntimeError(f"{original}: no icon found; has the theme's bundle changed format?")
    used = used_names(site)
    subset = {p: {n: d for n, d in icons.items() if n in used} for p, icons in packs.items()}
    notice = original.with_name(original.name + ".LICENSE.txt")   # Font Awesome's licence header
    header = notice.read_text(encoding="utf-8").strip() if notice.is_file() else ""
    out = (f"{MARKER}\n{header}\nvar ICONS = {json.dumps(subset, separators=(',', ':'))};\n"
           f"{_RUNTIME}")
    (site / BUNDLE).write_text(out, encoding="utf-8")
    (site / (BUNDLE + ".map")).unlink(missing_ok=True)    # the 1.7 MB map of the whole bundle
    css = site / THEME_CSS
    css.write_text(_GLYPH_RULE.sub("", css.read_text(encoding="utf-8")), encoding="utf-8")
    return len(out)
