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
 *     (head-selector-scroll), drawn for the box's width (cells shrink, labels stay 12 px) and
 *     drawn again when that width changes; it scrolls only if even the smallest cells do not fit;
 *   - the colour scale (one for all maps, or one per group when vmax is a list), then "Values as
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
  var FONT_PX = 12, CHAR_PX = 7.2, MIN_CELL = 8;

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

  // The map is drawn for the width it is read at: its cells shrink (down to MIN_CELL) to fit the
  // box, so that its labels keep their 12 px on a phone instead of being scaled down with it.
  function heatmap(spec, g, h, width) {
    var m = matrix(spec, g, h), q = labelsOf(spec.query, g), k = labelsOf(spec.key, g);
    var vmax = vmaxOf(spec, g);
    var n = Math.max(q.length, k.length);
    var left = Math.ceil(longest(q) * CHAR_PX) + 10;
    var top = Math.ceil(longest(k) * CHAR_PX * 0.71) + 14;
    var fits = Math.floor((width - left - Math.max(4, top - 14)) / k.length);
    var cell = Math.max(MIN_CELL, Math.min(32, Math.floor(420 / n), width > 0 ? fits : 32));
    var right = Math.max(4, top - 14 - Math.floor(cell / 2)); // the last column label leans right
    var width = left + cell * k.length + right, height = top + cell * q.length + 4;
    var showValues = cell >= 28;
    var label = "Attention weights, " + spec.heads[h] +
      (spec.groups.length > 1 ? ", " + spec.groups[g] : "") + "; rows are queries, columns are keys";
    var svg = svgEl("svg", {
      "class": "head-selector-heatmap", role: "img", "aria-label": label + " (the values: the table below)",
      width: width, height: height, viewBox: "0 0 " + width + " " + height,
      "font-size": FONT_PX, "font-family": "sans-serif",
      "data-group": g, "data-head": h
    });
    q.forEach(function (t, i) {
      svg.appendChild(svgEl("text", { "class": "head-selector-label", x: left - 6, y: top + cell * i + cell / 2,
        "text-anchor": "end", "dominant-baseline": "central" }, t));
    });
    k.forEach(function (t, j) {
      svg.appendChild(svgEl("text", { "class": "head-selector-label",
        transform: "translate(" + (left + cell * j + cell / 2) + "," + (top - 6) + ") rotate(-45)",
        "text-anchor": "start" }, t));
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

  // The colour scale of group g: its two ends and the gradient between (course CSS keeps the
  // gradient's colours in forced-colours mode, where backgrounds are otherwise dropped).
  function legend(spec, g) {
    var box = document.createElement("div");
    box.className = "head-selector-legend";
    var lo = document.createElement("span");
    lo.textContent = tick(spec.vmin);
    var bar = document.createElement("span");
    bar.className = "head-selector-colorbar";
    bar.style.background = "linear-gradient(to right, " + VIRIDIS.join(", ") + ")";
    var hi = document.createElement("span");
    hi.textContent = tick(vmaxOf(spec, g));
    box.append(lo, bar, hi);
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
