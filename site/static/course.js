/* Course site behaviour that the theme does not provide (loaded deferred on every page).
 *
 * 1. Wide boxes (tables, display equations, code, head-selector maps) scroll sideways inside
 *    their own box on a phone (head-selector maps shrink to fit instead); this marks the side(s) with more content (scroll-cue-left/-right),
 *    and course.css shades that edge (under the text) so the reader sees there is more. A box that scrolls and holds
 *    nothing focusable becomes a Tab stop, so the arrow keys scroll it.
 * 2. The "/" key opens the search (as Ctrl+K does), unless the reader is typing in a field.
 *
 * Maths needs no script: it is typeset when the site is built (site/math_prerender.py).
 */
(function () {
  "use strict";

  var WIDE = ".pst-scrollable-table-container, .bd-article pre, .bd-article div.math, " +
             ".bd-article mjx-container[display='true'], " +
             ".head-selector-scroll, .head-selector-table";
  var FOCUSABLE = "a[href], button, input, select, textarea, [tabindex]";

  function cue(box) {
    var more = box.scrollWidth - box.clientWidth;
    box.classList.toggle("scroll-cue-left", more > 1 && box.scrollLeft > 1);
    box.classList.toggle("scroll-cue-right", more > 1 && box.scrollLeft < more - 1);
    if (more > 1 && !box.hasAttribute("tabindex") && !box.querySelector(FOCUSABLE)) {
      box.setAttribute("tabindex", "0");   // a keyboard scroller (the arrow keys move it)
    }
  }

  var watched = new WeakSet();
  var resize = window.ResizeObserver ? new ResizeObserver(function (entries) {
    entries.forEach(function (e) { cue(e.target); });
  }) : null;

  function watchAll() {
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

  window.courseSite = { watchWideBoxes: watchAll };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", watchAll);
  } else {
    watchAll();
  }
  window.addEventListener("load", watchAll);
})();
