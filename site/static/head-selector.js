/* Head selector for the static course site (no kernel, no external library).
 *
 * A chapter cell calls mha_book.widgets.head_selector_html(...), whose output is
 *   <div class="head-selector">
 *     <script type="application/json" class="head-selector-data">{...}</script>
 *     <div class="head-selector-static">(an SVG of the first head, for places without this script)</div>
 *   </div>
 * This script, loaded on every page (html_js_files in _config.yml), replaces the static picture by
 *   - the selects (head-selector-head, plus head-selector-group for 4-D weights), never inside the
 *     sideways-scrolling box, so that they stay in view;
 *   - a status line (head-selector-status, aria-live) saying what is shown after each change;
 *   - the map (svg.head-selector-heatmap, rect.head-selector-cell) in its own box
 *     (head-selector-scroll), drawn for the box's width and drawn again when that width changes.
 *     Cells shrink to fit; labels never shrink below 10 px and never overlap (label() below):
 *     rows of tokens keep every label, so their cells stay a label's height and the box scrolls
 *     sideways if even those do not fit; an axis of positions (no tokens given: 1, 2, 3, ...)
 *     labels every k-th position instead once its cells are too small for every number;
 *   - the colour scale (one for all maps, or one per group when vmax is a list), named for a
 *     screen reader by what it shows and what its two ends mean, then "Values as
 *     a table" (details.head-selector-values): the same numbers
 *     as a table with a header per row and column, which keyboard and screen-reader users read
 *     cell by cell (the map is one picture to them).
 * The layout and colours match mha_book/widgets.py; keep the two in step.
 */
(function () {
  "use strict";

  var SVG_NS = "http://www.w3.org/2000/svg"; // an XML namespace name, never fetched
  var VIRIDIS = ["#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c",
                 "#28ae80", "#5ec962", "#addc30", "#fde725"];
  var COLOUR_NAMES = ["dark purple", "yellow"];   // viridis's two ends, in words
  // Labels are FONT_PX, or down to MIN_FONT_PX when cells are small; a label's box is LINE font
  // sizes high, and two labels on an axis are at least that far apart. Cells are at most MAX_CELL
  // and at least MIN_CELL (an axis of positions, thinned) or a MIN_FONT_PX label's line (tokens).
  var FONT_PX = 12, MIN_FONT_PX = 10, LINE = 1.2, CHAR_PX = 7.2, MIN_CELL = 8, MAX_CELL = 32;
  var TOKEN_CELL = Math.ceil(MIN_FONT_PX * LINE), LABEL_CELL = Math.ceil(FONT_PX * LINE);

  function hex(c) { return [1, 3, 5].map(function (j) { return parseInt(c.slice(j, j + 2), 16); }); }

  function colour(v, vmin, vmax) {
    var t = vmax <= vmin ? 0 : Math.min(1, Math.max(0, (v - vmin) / (vmax - vmin)));
    var x = t * (VIRIDIS.length - 1);
    var i = Math.min(Math.floor(x), VIRIDIS.length - 2), f = x - i;
    var a = hex(VIRIDIS[i]), b = hex(VIRIDIS[i + 1]);
    return "#" + a.map(function (ai, j) {
      var c = Math.round(ai * (1 - f) + b[j] * f);
      return (c < 16 ? "0" : "") + c.toString(16);
    }).join("");
  }

  function longest(labels) {
    return labels.reduce(function (m, s) { return Math.max(m, s.length); }, 0);
  }

  function svgEl(name, attrs, text) {
    var el = document.createElementNS(SVG_NS, name);
    Object.keys(attrs || {}).forEach(function (k) { el.setAttribute(k, attrs[k]); });
    if (text !== undefined) { el.textContent = text; }
    return el;
  }

  // Labels are one list, or one list per group (e.g. the tokens of each example).
  function labelsOf(labels, g) { return Array.isArray(labels[0]) ? labels[g] : labels; }

  // The colour scale's top: one for all maps, or one per group (spec.vmax is then a list).
  function vmaxOf(spec, g) { return Array.isArray(spec.vmax) ? spec.vmax[g] : spec.vmax; }

  // A label as a reader can tell it apart: "c" if it occurs once on its axis, else "c (3)", its
  // position counted from 1 (the toy task's letters repeat: "query c" would name two rows).
  function named(labels, i) {
    var t = labels[i];
    return labels.indexOf(t) === labels.lastIndexOf(t) ? t : t + " (" + (i + 1) + ")";
  }

  // A colour-bar end: at most 3 significant digits (0.21901321411132812 -> 0.219).
  function tick(v) { return String(Number(Number(v).toPrecision(3))); }

  // The page stores each weight as an integer, round(value * spec.scale): shorter than decimals.
  function matrix(spec, g, h) {
    return spec.weights[g][h].map(function (row) { return row.map(function (v) { return v / spec.scale; }); });
  }

  // Whether an axis is numbered by position (the chapter gave no tokens): it may be thinned.
  function isPositions(spec, axis) { return Boolean(spec.positions && spec.positions[axis]); }

  // Cell size, label size and label steps for a map of nq x nk cells in a box `width` wide (0:
  // unknown). Every shown label is at least MIN_FONT_PX and one line from its neighbours.
  function layout(spec, q, k, width) {
    var tokens = !(isPositions(spec, "query") && isPositions(spec, "key"));
    var left = Math.ceil(longest(q) * CHAR_PX) + 10, top = Math.ceil(longest(k) * CHAR_PX) + 10, right = 4;
    var fits = width > 0 ? Math.floor((width - left - right) / k.length) : MAX_CELL;
    var wanted = Math.min(MAX_CELL, Math.max(LABEL_CELL, Math.floor(420 / Math.max(q.length, k.length))));
    var cell = Math.max(tokens ? TOKEN_CELL : MIN_CELL, Math.min(wanted, fits));
    var font = tokens ? Math.max(MIN_FONT_PX, Math.min(FONT_PX, Math.floor(cell / LINE))) : FONT_PX;
    var step = function (axis) { return isPositions(spec, axis) ? Math.ceil(font * LINE / cell) : 1; };
    return { cell: cell, font: font, left: left, top: top, right: right,
             qStep: step("query"), kStep: step("key") };
  }

  // The map is drawn for the width it is read at: its cells shrink to fit the box, and its labels
  // stay readable (layout()); the SVG is never scaled down, so what layout() chose is what shows.
  function heatmap(spec, g, h, width) {
    var m = matrix(spec, g, h), q = labelsOf(spec.query, g), k = labelsOf(spec.key, g);
    var vmax = vmaxOf(spec, g);
    var box = layout(spec, q, k, width), cell = box.cell, left = box.left, top = box.top;
    var width = left + cell * k.length + box.right, height = top + cell * q.length + 4;
    var showValues = cell >= 28;
    var label = "Attention weights, " + spec.heads[h] +
      (spec.groups.length > 1 ? ", " + spec.groups[g] : "") + "; rows are queries, columns are keys";
    var svg = svgEl("svg", {
      "class": "head-selector-heatmap", role: "img",
      "aria-label": label + ", brighter is larger (the values: the table below)",
      width: width, height: height, viewBox: "0 0 " + width + " " + height,
      "font-size": box.font, "font-family": "sans-serif",
      "data-group": g, "data-head": h
    });
    q.forEach(function (t, i) {
      if (i % box.qStep) { return; }
      svg.appendChild(svgEl("text", { "class": "head-selector-label", x: left - 6, y: top + cell * i + cell / 2,
        "text-anchor": "end", "dominant-baseline": "central" }, t));
    });
    k.forEach(function (t, j) {      // column labels read upwards, one per column, like the figures'
      if (j % box.kStep) { return; }
      svg.appendChild(svgEl("text", { "class": "head-selector-label",
        transform: "translate(" + (left + cell * j + cell / 2) + "," + (top - 6) + ") rotate(-90)",
        "text-anchor": "start", "dominant-baseline": "central" }, t));
    });
    q.forEach(function (tq, i) {
      k.forEach(function (tk, j) {
        var v = m[i][j], s = v.toFixed(spec.digits);
        var rect = svgEl("rect", { "class": "head-selector-cell", "data-q": i, "data-k": j,
          "data-value": s, x: left + cell * j, y: top + cell * i, width: cell, height: cell,
          fill: colour(v, spec.vmin, vmax) });
        rect.appendChild(svgEl("title", {}, named(q, i) + " \u2192 " + named(k, j) + ": " + s));
        svg.appendChild(rect);
        if (showValues) {
          svg.appendChild(svgEl("text", { x: left + cell * j + cell / 2, y: top + cell * i + cell / 2,
            "text-anchor": "middle", "dominant-baseline": "central", "font-size": 10,
            fill: v > spec.vmin + 0.6 * (vmax - spec.vmin) ? "black" : "white",
            "pointer-events": "none" }, v.toFixed(2)));
        }
      });
    });
    return svg;
  }

  // The colour scale of group g: what it shows, its two ends and the gradient between (course
  // CSS keeps the gradient's colours in forced-colours mode, where backgrounds are otherwise
  // dropped). A screen reader hears it as one picture named in words, ends and colours included.
  function legend(spec, g) {
    var box = document.createElement("div");
    box.className = "head-selector-legend";
    var what = spec.scale_label || "attention weight";
    box.setAttribute("role", "img");
    box.setAttribute("aria-label", "Colour scale: " + what + " from " + tick(spec.vmin) + " (" +
                     COLOUR_NAMES[0] + ") to " + tick(vmaxOf(spec, g)) + " (" + COLOUR_NAMES[1] + ")");
    var name = document.createElement("div");
    name.className = "head-selector-legend-name";
    name.textContent = what + ":";
    var lo = document.createElement("span");
    lo.textContent = tick(spec.vmin);
    var bar = document.createElement("span");
    bar.className = "head-selector-colorbar";
    bar.style.background = "linear-gradient(to right, " + VIRIDIS.join(", ") + ")";
    var hi = document.createElement("span");
    hi.textContent = tick(vmaxOf(spec, g));
    [name, lo, bar, hi].forEach(function (part) { part.setAttribute("aria-hidden", "true"); });  // the name says it
    box.append(name, lo, bar, hi);
    return box;
  }

  // The numbers of one map as a table: a header per column (key) and per row (query).
  function valueTable(spec, g, h) {
    var m = matrix(spec, g, h), q = labelsOf(spec.query, g), k = labelsOf(spec.key, g);
    var table = document.createElement("table");
    var caption = table.createCaption();
    caption.textContent = describe(spec, g, h) + ": one row per query, one column per key";
    var head = table.createTHead().insertRow();
    var corner = document.createElement("th");
    corner.textContent = "query \\ key";
    head.appendChild(corner);
    k.forEach(function (t, j) {
      var th = document.createElement("th");
      th.scope = "col";
      th.textContent = named(k, j);
      head.appendChild(th);
    });
    var body = table.createTBody();
    q.forEach(function (t, i) {
      var row = body.insertRow();
      var th = document.createElement("th");
      th.scope = "row";
      th.textContent = named(q, i);
      row.appendChild(th);
      m[i].forEach(function (v) { row.insertCell().textContent = v.toFixed(spec.digits); });
    });
    return table;
  }

  // "c (3)" -> \u201cc\u201d (3); "it" -> \u201cit\u201d
  function quoted(name) { return name.replace(/^(.*?)( \(\d+\))?$/, "\u201c$1\u201d$2"); }

  function describe(spec, g, h) {
    return spec.heads[h] + (spec.groups.length > 1 ? ", " + spec.groups[g] : "");
  }

  // What a screen reader hears after a change: which map, and its strongest weight.
  function summary(spec, g, h) {
    var m = matrix(spec, g, h), q = labelsOf(spec.query, g), k = labelsOf(spec.key, g);
    var best = [0, 0];
    m.forEach(function (row, i) { row.forEach(function (v, j) { if (v > m[best[0]][best[1]]) { best = [i, j]; } }); });
    return "Showing " + describe(spec, g, h) + ". Strongest weight " +
      m[best[0]][best[1]].toFixed(spec.digits) + ", from query " + quoted(named(q, best[0])) +
      " to key " + quoted(named(k, best[1])) + ".";
  }

  function select(cls, labelText, names) {
    var label = document.createElement("label");
    label.textContent = labelText + " ";
    var sel = document.createElement("select");
    sel.className = cls;
    names.forEach(function (name, i) {
      var opt = document.createElement("option");
      opt.value = String(i);
      opt.textContent = name;
      sel.appendChild(opt);
    });
    label.appendChild(sel);
    return { label: label, select: sel };
  }

  function setup(box) {
    if (box.getAttribute("data-hs-ready")) { return; }
    var data = box.querySelector("script.head-selector-data");
    if (!data) { return; }
    var spec;
    try {
      spec = JSON.parse(data.textContent);
    } catch (err) {
      box.setAttribute("data-hs-ready", "error");
      console.warn("head-selector: unreadable data", err);
      return;
    }
    // One named group: a screen reader says which viewer the focus entered (a skip link lands here).
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", "Head viewer" + (spec.title ? ": " + spec.title : ""));
    var controls = document.createElement("div");
    controls.className = "head-selector-controls";
    if (spec.title) {
      var title = document.createElement("p");
      title.className = "head-selector-title";
      title.textContent = spec.title;
      box.appendChild(title);
    }
    var group = null;
    if (spec.groups.length > 1) {
      group = select("head-selector-group", spec.group_label, spec.groups);
      controls.appendChild(group.label);
    }
    var head = select("head-selector-head", "Head", spec.heads);
    controls.appendChild(head.label);
    var status = document.createElement("p");
    status.className = "head-selector-status";
    status.setAttribute("aria-live", "polite");
    var scroll = document.createElement("div");
    scroll.className = "head-selector-scroll";
    var values = document.createElement("details");
    values.className = "head-selector-values";
    var opener = document.createElement("summary");
    opener.textContent = "Values as a table";
    var tableBox = document.createElement("div");
    tableBox.className = "head-selector-table";
    values.append(opener, tableBox);

    var scale = document.createElement("div");
    var drawnWidth = -1;
    function draw(announce) {
      var g = group ? Number(group.select.value) : 0, h = Number(head.select.value);
      drawnWidth = scroll.clientWidth;
      scroll.replaceChildren(heatmap(spec, g, h, drawnWidth));
      scale.replaceChildren(legend(spec, g));
      tableBox.replaceChildren(valueTable(spec, g, h));
      if (announce) { status.textContent = summary(spec, g, h); }
      box.setAttribute("data-group", g);
      box.setAttribute("data-head", h);
    }
    head.select.addEventListener("change", function () { draw(true); });
    if (group) { group.select.addEventListener("change", function () { draw(true); }); }

    var fallback = box.querySelector(".head-selector-static");
    if (fallback) { fallback.remove(); }
    box.append(controls, status, scroll, scale, values);
    draw(false);
    if (window.ResizeObserver) {      // a rotated phone, a zoom: drawn again for the new width
      new ResizeObserver(function () {
        if (scroll.clientWidth !== drawnWidth) { draw(false); }
      }).observe(scroll);
    }
    box.setAttribute("data-hs-ready", "true");
    if (window.courseSite) { window.courseSite.watchWideBoxes(); }
  }

  function setupAll() {
    Array.prototype.forEach.call(document.querySelectorAll("div.head-selector"), setup);
  }

  window.mhaHeadSelector = { setupAll: setupAll };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setupAll);
  } else {
    setupAll();
  }
})();
