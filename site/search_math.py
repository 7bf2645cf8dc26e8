"""Search that understands maths notation: a search for ``W^O`` finds the pages about W^O.

Sphinx's search splits text and queries at every non-word character, so ``W^O`` becomes the
letters ``w`` and ``o``, which are on every page; its snippets show raw TeX (``\\(W^O\\)``).

Here one notation gets one search word, on both sides of the search:

* the index (Python, :class:`MathAwareEnglish`) adds a word for every symbol with sub- or
  superscripts in the text, TeX included: ``W^O``, ``W^{O}`` and ``W_o`` give ``w_o``; ``W_i^Q``
  gives ``w_i_q``; ``d_{\\text{model}}`` gives ``d_model`` (code's ``d_model`` is the same word);
* the query (JavaScript, :data:`JS`, which Sphinx puts into ``language_data.js``) makes the same
  word from what the reader types, and its snippets show TeX as text (``QKᵀ/√(d_k)``).

Subscripts and superscripts give the same word on purpose: the sources write W^O and W_o for the
same matrix.
"""
from __future__ import annotations

import re

from sphinx.search.en import SearchEnglish

import search_pages

# TeX wrappers whose argument is the text itself: \text{model} -> model.
_WRAPPERS = re.compile(r"\\(?:text|mathrm|mathit|mathbf|mathsf|boldsymbol|operatorname)\s*\{([^{}]*)\}")
# A TeX command (skipped, so that its letters are not taken for a symbol), or a one-letter symbol
# followed by its sub- and superscripts.
_SYMBOL = re.compile(r"\\[A-Za-z]+|(?P<base>[A-Za-z])(?P<scripts>(?:\s*[_^]\s*(?:\{[^{}]*\}|\\[A-Za-z]+|[A-Za-z0-9]))+)")
_SCRIPT = re.compile(r"(?P<kind>[_^])\s*(?:\{(?P<braced>[^{}]*)\}|\\(?P<cmd>[A-Za-z]+)|(?P<char>[A-Za-z0-9]))")


def math_words(text: str) -> list[str]:
    """The search words of the maths notation in ``text`` (see the module docstring)."""
    words = []
    for m in _SYMBOL.finditer(_WRAPPERS.sub(r"\1", text)):
        if not m["base"]:
            continue
        subs, sups = [], []
        for s in _SCRIPT.finditer(m["scripts"]):
            part = re.sub(r"[^A-Za-z0-9]", "", s["braced"] or s["cmd"] or s["char"] or "").lower()
            if part:
                (subs if s["kind"] == "_" else sups).append(part)
        if subs or sups:
            words.append("_".join([m["base"].lower(), *subs, *sups]))
    return words


# Same rules as math_words, for the query; then Sphinx's own split for the rest of the query.
JS = r"""
var MATH_WRAPPERS = /\\(?:text|mathrm|mathit|mathbf|mathsf|boldsymbol|operatorname)\s*\{([^{}]*)\}/g;
var MATH_SYMBOL = /\\[A-Za-z]+|([A-Za-z])((?:\s*[_^]\s*(?:\{[^{}]*\}|\\[A-Za-z]+|[A-Za-z0-9]))+)/g;
var MATH_SCRIPT = /([_^])\s*(?:\{([^{}]*)\}|\\([A-Za-z]+)|([A-Za-z0-9]))/g;

function mathWords(text) {
  var words = [];
  text.replace(MATH_WRAPPERS, "$1").replace(MATH_SYMBOL, function (all, base, scripts) {
    if (!base) { return all; }
    var subs = [], sups = [];
    scripts.replace(MATH_SCRIPT, function (s, kind, braced, cmd, ch) {
      var part = (braced || cmd || ch || "").replace(/[^A-Za-z0-9]/g, "").toLowerCase();
      if (part) { (kind === "_" ? subs : sups).push(part); }
      return s;
    });
    if (subs.length || sups.length) { words.push([base.toLowerCase()].concat(subs, sups).join("_")); }
    return all;
  });
  return words;
}

function splitQuery(query) {
  var words = mathWords(query);
  var rest = query.replace(MATH_WRAPPERS, "$1").replace(MATH_SYMBOL, function (all, base) {
    return base ? " " : all;
  });
  rest.split(/[^\p{Letter}\p{Number}_\p{Emoji_Presentation}]+/gu).forEach(function (w) {
    if (w && words.indexOf(w.toLowerCase()) < 0) { words.push(w); }
  });
  return words;
}

/* Snippets: TeX as readable text. */
var MATH_SYMBOLS = { top: "\u1d40", times: "\u00d7", cdot: "\u00b7", approx: "\u2248", le: "\u2264",
  leq: "\u2264", ge: "\u2265", geq: "\u2265", ne: "\u2260", neq: "\u2260", to: "\u2192",
  rightarrow: "\u2192", in: "\u2208", sum: "\u03a3", infty: "\u221e", ldots: "\u2026",
  cdots: "\u22ef", dots: "\u2026", alpha: "\u03b1", beta: "\u03b2", sigma: "\u03c3", mu: "\u03bc",
  lambda: "\u03bb", epsilon: "\u03b5", left: "", right: "", big: "", Big: "", quad: " ", qquad: " " };

function readableTex(tex) {
  return tex.replace(MATH_WRAPPERS, "$1")
    .replace(/\\mathbb\s*\{R\}/g, "\u211d")
    .replace(/\\sqrt\s*\{([^{}]*)\}/g, "\u221a($1)")
    .replace(/\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}/g, "($1)/($2)")
    .replace(/\\[,;:! ]/g, " ")
    .replace(/\\([A-Za-z]+)/g, function (m, name) {
      return Object.prototype.hasOwnProperty.call(MATH_SYMBOLS, name) ? MATH_SYMBOLS[name] : name;
    })
    .replace(/\^\s*\{?\s*\u1d40\s*\}?/g, "\u1d40")
    .replace(/[{}]/g, "").replace(/\s+/g, " ").trim();
}

// A typeset formula (site/math_prerender.py) as its TeX, which readableMathHtml then reads.
function texOfFormulas(html) {
  if (html.indexOf("data-tex") < 0) { return html; }
  var doc = new DOMParser().parseFromString(html, "text/html");
  doc.querySelectorAll("[data-tex]").forEach(function (m) {
    m.replaceWith(doc.createTextNode("\\(" + m.getAttribute("data-tex") + "\\)"));
  });
  return doc.documentElement.outerHTML;
}

function readableMathHtml(html) {
  return html.replace(/\\\(([\s\S]+?)\\\)/g, function (m, tex) { return readableTex(tex); })
             .replace(/\\\[([\s\S]+?)\\\]/g, function (m, tex) { return readableTex(tex); });
}

if (typeof Search !== "undefined") {
  (function () {
    var toText = Search.htmlToText, summary = Search.makeSearchSummary;
    Search.htmlToText = function (html, anchor) { return toText(readableMathHtml(texOfFormulas(html)), anchor); };
    // A maths word (w_o) is found in the snippet text as written there (W^O or W_o).
    Search.makeSearchSummary = function (html, keywords, anchor) {
      var more = new Set(keywords);
      keywords.forEach(function (k) { more.add(k.replace(/_/g, "^")); });
      return summary(html, more, anchor);
    };
  })();
}
"""


class MathAwareEnglish(SearchEnglish):
    """English search with one word per maths symbol (see the module docstring)."""

    js_splitter_code = JS + search_pages.JS

    def split(self, input: str) -> list[str]:
        return super().split(input) + math_words(input)
