/* Course site behaviour that the theme does not provide (loaded deferred on every page).
 *
 * 1. Wide boxes (tables, display equations, code, head-selector maps) scroll sideways inside
 *    their own box on a phone (a head-selector map shrinks its cells first, down to what its
 *    labels need); this marks the side(s) with more content (scroll-cue-left/-right),
 *    and course.css shades that edge (under the text) so the reader sees there is more. A box that scrolls and holds
 *    nothing focusable becomes a Tab stop, so the arrow keys scroll it. An inline formula wider
 *    than its line (it cannot break) becomes such a box too (math-scroll), so that the page
 *    never scrolls sideways (reflow at 320 px).
 * 2. The "/" key opens the search (as Ctrl+K does), unless the reader is typing in a field.
 * 3. Copying text copies its formulas as TeX ($...$ inline, $$...$$ displayed), from each formula's
 *    data-tex (site/math_prerender.py): the typeset glyphs are CSS content and the MathML copy
 *    is not selectable, so the browser's own copy drops every formula.
 *
 * Maths needs no script: it is typeset when the site is built (site/math_prerender.py).
 */
(function () {
  "use strict";

  var WIDE = ".pst-scrollable-table-container, .bd-article pre, .bd-article div.math, " +
             ".bd-article mjx-container[display='true'], .bd-article span.math.math-scroll, " +
             ".head-selector-scroll, .head-selector-table";
  var FOCUSABLE = "a[href], button, input, select, textarea, [tabindex]";

  function cue(box) {
    var more = box.scrollWidth - box.clientWidth;
    box.classList.toggle("scroll-cue-left", more > 1 && box.scrollLeft > 1);
    box.classList.toggle("scroll-cue-right", more > 1 && box.scrollLeft < more - 1);
    if (more > 1 && !box.hasAttribute("tabindex") && !box.querySelector(FOCUSABLE)) {
      box.setAttribute("tabindex", "0");   // a keyboard scroller (the arrow keys move it)
      box.classList.add("course-scroller");   // its focus ring is drawn inside it (course.css)
    }
  }

  var watched = new WeakSet();
  var resize = window.ResizeObserver ? new ResizeObserver(function (entries) {
    entries.forEach(function (e) { cue(e.target); });
  }) : null;

  // The width of the block that an inline element's lines fill.
  function lineWidth(el) {
    var block = el.parentElement;
    while (block.parentElement && getComputedStyle(block).display.indexOf("inline") === 0) { block = block.parentElement; }
    var style = getComputedStyle(block);
    return block.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  }

  function fitFormulas() {
    Array.prototype.forEach.call(document.querySelectorAll(".bd-article span.math[data-tex]"), function (math) {
      var formula = math.querySelector("mjx-container");
      if (formula) { math.classList.toggle("math-scroll", formula.getBoundingClientRect().width > lineWidth(math) + 0.5); }
    });
  }

  function watchAll() {
    fitFormulas();
    Array.prototype.forEach.call(document.querySelectorAll(WIDE), function (box) {
      cue(box);
      if (watched.has(box)) { return; }
      watched.add(box);
      box.addEventListener("scroll", function () { cue(box); }, { passive: true });
      if (resize) { resize.observe(box); }
    });
  }

  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }

  document.addEventListener("keydown", function (event) {
    if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) {
      return;
    }
    var button = document.querySelector(".search-button-field, .search-button__button");
    if (button) {
      event.preventDefault();
      button.click();
    }
  });

  // 3. Formulas copied as TeX.
  function asTex(math) {
    var tex = math.getAttribute("data-tex");
    return math.tagName === "DIV" ? "\n$$\n" + tex + "\n$$\n" : "$" + tex + "$";
  }

  function plainText(fragment) {
    // innerText of a laid-out copy keeps the line breaks between paragraphs (textContent would not)
    var box = document.createElement("div");
    box.style.cssText = "position:fixed;left:-10000px;top:0;width:40em;white-space:normal";
    box.appendChild(fragment);
    document.body.appendChild(box);
    var text = box.innerText;
    box.remove();
    return text;
  }

  document.addEventListener("copy", function (event) {
    var selection = window.getSelection();
    if (!event.clipboardData || !selection || selection.isCollapsed || !selection.rangeCount) { return; }
    var range = selection.getRangeAt(0);
    var start = range.commonAncestorContainer;
    var inside = (start.nodeType === 1 ? start : start.parentElement).closest("[data-tex]");
    var text;
    if (inside) {                           // the selection lies within one formula
      text = asTex(inside).trim();
    } else {
      var fragment = range.cloneContents();
      var maths = fragment.querySelectorAll("[data-tex]");
      if (!maths.length) { return; }        // no formula: the browser's own copy
      Array.prototype.forEach.call(maths, function (math) {
        math.replaceWith(document.createTextNode(asTex(math)));
      });
      text = plainText(fragment);
    }
    event.clipboardData.setData("text/plain", text);
    event.preventDefault();
  });

  window.courseSite = { watchWideBoxes: watchAll };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", watchAll);
  } else {
    watchAll();
  }
  window.addEventListener("load", watchAll);
  var resizing = null;
  window.addEventListener("resize", function () {      // a rotated phone, a zoom: formulas fit again
    clearTimeout(resizing);
    resizing = setTimeout(watchAll, 100);
  });
})();
