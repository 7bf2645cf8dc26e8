// Renders the site's TeX at build time with MathJax's node package (mathjax-full), so that pages
// load no maths JavaScript and never show raw TeX (site/math_prerender.py runs this).
//
//   node render_math.js NODE_MODULES < pages.json > rendered.json
//
// stdin:  [{"page": "chapters/x.html", "font_url": "../mathjax/fonts", "math": [[tex, display], ...]}, ...]
// stdout: [{"html": ["<mjx-container ...>", ...], "css": "..."}, ...]             (same order)
// Each formula becomes CHTML (drawn with MathJax's TeX web fonts, served by the site) plus a hidden
// MathML copy that screen readers read (MathJax's assistive-mml). A TeX error ends the run with
// the formula named (exit 1), so the strict build fails instead of printing red TeX.
"use strict";
const path = require("path");
const fs = require("fs");

const modules = path.resolve(process.argv[2]);
const mj = (name) => require(path.join(modules, "mathjax-full", "js", name));
const { mathjax } = mj("mathjax.js");
const { TeX } = mj("input/tex.js");
const { CHTML } = mj("output/chtml.js");
const { liteAdaptor } = mj("adaptors/liteAdaptor.js");
const { RegisterHTMLHandler } = mj("handlers/html.js");
const { AssistiveMmlHandler } = mj("a11y/assistive-mml.js");
const { AllPackages } = mj("input/tex/AllPackages.js");

const MATHML_XMLNS = / xmlns="http:\/\/www\.w3\.org\/1998\/Math\/MathML"/g;
const adaptor = liteAdaptor({ fontSize: 16 });
AssistiveMmlHandler(RegisterHTMLHandler(adaptor));

function renderPage(page) {
  const tex = new TeX({
    packages: AllPackages.filter((p) => p !== "bussproofs"),
    formatError: (jax, err) => { throw err; },
  });
  const chtml = new CHTML({ fontURL: page.font_url });
  const doc = mathjax.document("", { InputJax: tex, OutputJax: chtml });
  const html = page.math.map(([source, display]) => {
    try {
      // In HTML, <math> is MathML without its xmlns (the parser knows it): 44 bytes a formula less.
      return adaptor.outerHTML(doc.convert(source, { display })).replace(MATHML_XMLNS, "");
    } catch (err) {
      throw new Error(`${page.page}: TeX error in ${JSON.stringify(source)}: ${err.message}`);
    }
  });
  return { html, css: adaptor.textContent(chtml.styleSheet(doc)) };
}

try {
  const pages = JSON.parse(fs.readFileSync(0, "utf8"));
  process.stdout.write(JSON.stringify(pages.map(renderPage)));
} catch (err) {
  process.stderr.write(String(err.message || err) + "\n");
  process.exit(1);
}
