/* Course site behaviour that the theme does not provide (loaded in <head>, not deferred).
 *
 * 1. Until MathJax has typeset the page, its raw TeX (\( W^O \)) is hidden (course.css,
 *    html.mathjax-pending); the space stays reserved, so nothing jumps. If MathJax never
 *    finishes, the TeX is shown after 8 s rather than hidden for good.
 *    MathJax itself (startup.js) loads only what the pages need: TeX input, CHTML output and
 *    the hidden MathML copy that screen readers read. Its context menu (zoom, "show math as",
 *    the accessibility explorer; 430 kB, a third of MathJax) is loaded the first time a reader
 *    right-clicks or long-presses a formula, or presses Enter, Space, the menu key or Shift+F10
 *    on a focused one, and then opens; a reader who has saved menu settings gets it on every
 *    page load.
 * 2. Wide boxes (tables, display equations, code, head selectors) scroll sideways inside their
 *    own box on a phone; this marks the side(s) with more content (scroll-cue-left/-right),
 *    and course.css fades that edge so the reader sees there is more.
 */
(function () {
  "use strict";
  var root = document.documentElement;
  root.classList.add("mathjax-pending");

  function reveal() { root.classList.remove("mathjax-pending"); }
  setTimeout(reveal, 8000);

  var MENU_SETTINGS = "MathJax-Menu-Settings";   // where MathJax's menu keeps a reader's choices
  function savedMenuSettings() {
    try { return !!window.localStorage.getItem(MENU_SETTINGS); } catch (err) { return false; }
  }
  var mathjax = window.MathJax = window.MathJax || {};   // Sphinx's config script ran just before
  mathjax.loader = mathjax.loader || {};
  mathjax.loader.load = ["input/tex", "output/chtml", "a11y/assistive-mml"]
    .concat(savedMenuSettings() ? ["ui/menu"] : []);

  var menuLoading = null;
  function loadMenu() {
    var MJ = window.MathJax;
    if (!menuLoading) {
      menuLoading = MJ.startup.promise
        .then(function () { return MJ.loader.load("ui/menu"); })
        .then(function () {
          // Put the TeX back, then typeset it again with a document that has the menu.
          Array.from(MJ.startup.document.math).forEach(function (item) { item.removeFromDocument(true); });
          MJ.startup.getComponents();
          return MJ.typesetPromise();
        });
    }
    return menuLoading;
  }
  function menuIsLoaded() { var MJ = window.MathJax; return !!(MJ && MJ._ && MJ._.ui && MJ._.ui.menu); }

  // Load the menu for this formula, then open it on the same formula (re-typeset by then).
  function openMenuFor(math, x, y) {
    var index = Array.prototype.indexOf.call(document.querySelectorAll("mjx-container"), math);
    loadMenu().then(function () {
      var again = document.querySelectorAll("mjx-container")[index];
      if (!again) { return; }
      if (x === undefined) {
        var box = again.getBoundingClientRect();
        x = box.left + box.width / 2; y = box.top + box.height / 2;
        again.focus();
      }
      again.dispatchEvent(new MouseEvent("contextmenu", { bubbles: true, cancelable: true,
                                                          clientX: x, clientY: y }));
    });
  }

  function startedMathJax() {
    var MJ = window.MathJax;
    return MJ && MJ.startup && MJ.startup.promise && !menuIsLoaded();
  }

  // Right-click or long press on a formula.
  document.addEventListener("contextmenu", function (event) {
    var math = event.target.closest && event.target.closest("mjx-container");
    if (!math || !startedMathJax()) { return; }
    event.preventDefault();
    openMenuFor(math, event.clientX, event.clientY);
  });
  // Keyboard: formulas are focusable (as with MathJax's own menu); the menu key, Shift+F10,
  // Enter or Space on one opens its menu.
  document.addEventListener("keydown", function (event) {
    var math = event.target.closest && event.target.closest("mjx-container");
    var keys = event.key === "ContextMenu" || event.key === "Enter" || event.key === " " ||
               (event.shiftKey && event.key === "F10");
    if (!math || !keys || !startedMathJax()) { return; }
    event.preventDefault();
    openMenuFor(math);
  });
  function focusableMath() {
    if (menuIsLoaded()) { return; }
    Array.prototype.forEach.call(document.querySelectorAll("mjx-container:not([tabindex])"),
      function (m) { m.setAttribute("tabindex", "0"); });
  }

  var WIDE = ".pst-scrollable-table-container, .bd-article pre, .bd-article div.math, " +
             ".bd-article mjx-container[display='true'], .head-selector";

  function cue(box) {
    var more = box.scrollWidth - box.clientWidth;
    box.classList.toggle("scroll-cue-left", more > 1 && box.scrollLeft > 1);
    box.classList.toggle("scroll-cue-right", more > 1 && box.scrollLeft < more - 1);
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

  window.courseSite = { watchWideBoxes: watchAll };
  document.addEventListener("DOMContentLoaded", watchAll);
  window.addEventListener("load", function () {
    watchAll();
    var M = window.MathJax;
    var done = M && M.startup && M.startup.promise ? M.startup.promise : Promise.resolve();
    done.then(function () { reveal(); watchAll(); focusableMath(); }, reveal);
  });
})();
