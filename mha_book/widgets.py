"""A head selector for the static course site: pick a head, see its attention weights.

:func:`head_selector_html` returns an ``IPython.display.HTML`` object. Its markup carries the
weights as JSON, plus a static SVG picture of the first head:

* on the course website, ``site/static/head-selector.js`` (loaded on every page) finds each
  ``<div class="head-selector">``, replaces the static picture by a ``<select>`` (and a second one
  for the first axis of 4-D weights), an SVG heatmap it redraws on change, a status line that
  says what changed, and the same values as a table (for keyboard and screen-reader users); no
  kernel, no external library;
* in Jupyter, Colab or anywhere without that script, the static picture of the first head shows.

The CSS classes are a stable interface (the site test and the script rely on them):
``head-selector`` (the container; ``data-group``/``data-head`` hold the current choice once the
script ran), ``head-selector-data`` (the JSON), ``head-selector-static`` (the no-JS picture),
``head-selector-controls``, ``head-selector-group`` and ``head-selector-head`` (the selects),
``head-selector-status`` (aria-live), ``head-selector-scroll`` (the map's box),
``head-selector-heatmap`` (the SVG), ``head-selector-cell`` (one rect per weight; on the site with
``data-q``, ``data-k`` and ``data-value``) and ``head-selector-values`` (the table, folded).

The JSON stores each weight as an integer, ``round(value * scale)`` with ``scale = 10**digits``
(``0.123`` -> ``123``): a page with thousands of weights stays light.

Colours follow :mod:`mha_book.plotting` (viridis, 0 to ``vmax``; rows are queries, columns keys).
"""
from __future__ import annotations

import html
import json
import math

import numpy as np

__all__ = ["head_selector_html", "head_selector_markup", "VIRIDIS"]

#: Viridis sampled at 9 evenly spaced points; the JS file interpolates between the same stops.
VIRIDIS = ("#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c",
           "#28ae80", "#5ec962", "#addc30", "#fde725")

#: Above this many numbers the page gets heavy; slice the weights first.
MAX_VALUES = 200_000

_FONT_PX = 12
_CHAR_PX = 7.2  # rough width of one character of a 12 px sans-serif label
_LINE = 1.2     # a label's box is this many font sizes high: neighbours are at least that far apart
#: Viridis's two ends in words, for the colour scale's name.
COLOUR_NAMES = ("dark purple", "yellow")


def _to_numpy(weights):
    if hasattr(weights, "detach"):  # a torch tensor, possibly on a GPU or requiring grad
        weights = weights.detach().cpu().numpy()
    return np.asarray(weights, dtype=float)


def _labels(tokens, n, what):
    tokens = [str(t) for t in tokens]
    if len(tokens) != n:
        raise ValueError(f"{what}: {len(tokens)} labels for an axis of length {n}.")
    return tokens


def _axis_labels(tokens, n, n_groups, what):
    """One list of ``n`` labels, or one list per group when the labels differ between groups
    (e.g. the letters of each example)."""
    tokens = list(tokens)
    if tokens and isinstance(tokens[0], (list, tuple)):
        if len(tokens) != n_groups:
            raise ValueError(f"{what}: {len(tokens)} label lists for {n_groups} groups.")
        return [_labels(t, n, f"{what}[{g}]") for g, t in enumerate(tokens)]
    return _labels(tokens, n, what)


def _positions(n):
    return [str(i + 1) for i in range(n)]


def _first(labels):
    """The labels of the first group (or the shared labels)."""
    return labels[0] if labels and isinstance(labels[0], list) else labels


def _colour(value, vmin, vmax):
    """The viridis colour of ``value`` on the scale [vmin, vmax], as ``#rrggbb``."""
    t = 0.0 if vmax <= vmin else min(1.0, max(0.0, (value - vmin) / (vmax - vmin)))
    x = t * (len(VIRIDIS) - 1)
    i = min(int(x), len(VIRIDIS) - 2)
    f = x - i
    a, b = VIRIDIS[i], VIRIDIS[i + 1]
    rgb = [round(int(a[j:j + 2], 16) * (1 - f) + int(b[j:j + 2], 16) * f) for j in (1, 3, 5)]
    return "#" + "".join(f"{c:02x}" for c in rgb)


def _geometry(query, key):
    """Cell size and margins of the static picture: head-selector.js's layout() with no width
    limit, where every label fits (cells at least one 12 px label's line)."""
    n = max(len(query), len(key))
    cell = min(32, max(math.ceil(_FONT_PX * _LINE), math.floor(420 / n)))
    left = math.ceil(max(map(len, query)) * _CHAR_PX) + 10
    top = math.ceil(max(map(len, key)) * _CHAR_PX) + 10    # column labels read upwards
    return cell, left, top, 4


def _svg(matrix, query, key, vmin, vmax, digits, label):
    """The static SVG heatmap of one (T_q, T_k) matrix (same layout as head-selector.js); its cells
    carry no per-value text (the site's script draws the interactive one, with a table)."""
    cell, left, top, right = _geometry(query, key)
    width, height = left + cell * len(key) + right, top + cell * len(query) + 4
    show_values = cell >= 28
    e = html.escape
    out = [f'<svg class="head-selector-heatmap" role="img" aria-label="{e(label)}" '
           f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'font-size="{_FONT_PX}" font-family="sans-serif">']
    for i, q in enumerate(query):
        y = top + cell * i + cell / 2
        out.append(f'<text class="head-selector-label" x="{left - 6}" y="{y:g}" text-anchor="end" '
                   f'dominant-baseline="central">{e(q)}</text>')
    for j, k in enumerate(key):
        x = left + cell * j + cell / 2
        out.append(f'<text class="head-selector-label" transform="translate({x:g},{top - 6}) rotate(-90)" '
                   f'text-anchor="start" dominant-baseline="central">{e(k)}</text>')
    for i in range(len(query)):
        for j in range(len(key)):
            v = float(matrix[i, j])
            out.append(f'<rect class="head-selector-cell" x="{left + cell * j}" y="{top + cell * i}" '
                       f'width="{cell}" height="{cell}" fill="{_colour(v, vmin, vmax)}"/>')
            if show_values:
                ink = "black" if v > vmin + 0.6 * (vmax - vmin) else "white"
                out.append(f'<text x="{left + cell * j + cell / 2:g}" y="{top + cell * i + cell / 2:g}" '
                           f'text-anchor="middle" dominant-baseline="central" font-size="10" '
                           f'fill="{ink}" pointer-events="none">{v:.2f}</text>')
    out.append("</svg>")
    return "".join(out)


def head_selector_markup(weights, query_tokens=None, key_tokens=None, head_names=None, title=None, *,
                         group_names=None, group_label="Example", vmin=0.0, vmax=None,
                         digits=3, scale_label="attention weight"):
    """The HTML string behind :func:`head_selector_html` (same arguments)."""
    w = _to_numpy(weights)
    if w.ndim == 3:
        w = w[None]
    if w.ndim != 4:
        raise ValueError("weights: expected (heads, T_q, T_k) or (groups, heads, T_q, T_k), "
                         f"got shape {tuple(w.shape)}.")
    if 0 in w.shape:
        raise ValueError(f"weights: an axis is empty, shape {tuple(w.shape)}.")
    if not np.isfinite(w).all():
        raise ValueError("weights: contains NaN or infinite values.")
    if w.size > MAX_VALUES:
        raise ValueError(f"weights: {w.size} values is too many for one page (limit {MAX_VALUES}); "
                         "slice out fewer heads, examples or tokens.")
    n_groups, n_heads, t_q, t_k = w.shape
    # No tokens: positions, counted from 1 (a long axis of them may be labelled every k-th).
    positions = {"query": query_tokens is None, "key": key_tokens is None and query_tokens is None}
    query = _axis_labels(_positions(t_q) if positions["query"] else query_tokens, t_q, n_groups, "query_tokens")
    key = _axis_labels(_positions(t_k) if positions["key"] else
                       query_tokens if key_tokens is None else key_tokens, t_k, n_groups,
                       "key_tokens" if key_tokens is not None else "query_tokens (used as keys)")
    heads = _labels([f"head {h + 1}" for h in range(n_heads)] if head_names is None else head_names,
                    n_heads, "head_names")
    groups = _labels([f"{group_label} {g + 1}" for g in range(n_groups)] if group_names is None
                     else group_names, n_groups, "group_names")
    if vmax is None:
        vmax = 1.0 if (w.min() >= 0.0 and w.max() <= 1.0) else float(w.max())
    vmin = float(vmin)
    if np.ndim(vmax) == 1:          # one scale per group: each group's maps as on its own figure
        vmax = [float(v) for v in vmax]
        if len(vmax) != n_groups:
            raise ValueError(f"vmax: {len(vmax)} scales for {n_groups} groups (give one number, or one per group).")
    else:
        vmax = float(vmax)
    if not min(np.atleast_1d(vmax)) > vmin:
        raise ValueError(f"vmax ({vmax}) must be larger than vmin ({vmin}).")

    spec = {
        "version": 1,
        "title": title or "",
        "group_label": str(group_label),
        "groups": groups,
        "heads": heads,
        "query": query,
        "key": key,
        "positions": positions,
        "scale_label": str(scale_label),
        "vmin": vmin,
        "vmax": vmax,
        "digits": int(digits),
        "scale": 10 ** int(digits),
        "weights": np.rint(w * 10 ** int(digits)).astype(np.int64).tolist(),  # (G, H, T_q, T_k) ints
    }
    # Inside <script>, "</script" or "<!--" would end or confuse the element: escape < > &.
    payload = (json.dumps(spec, separators=(",", ":"), allow_nan=False)
               .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
    first = f"{heads[0]}" + (f", {groups[0]}" if n_groups > 1 else "")
    caption = (f"{html.escape(title)} &#8212; " if title else "") + html.escape(first)
    top = float(np.atleast_1d(vmax)[0])
    scale = (f"colour: {scale_label} from {vmin:.3g} ({COLOUR_NAMES[0]}) to {top:.3g} ({COLOUR_NAMES[1]})")
    static = _svg(w[0, 0], _first(query), _first(key), vmin, top, int(digits),
                  f"Attention weights, {first}; rows are queries, columns are keys; {scale}")
    return (
        '<div class="head-selector" data-head-selector-version="1">'
        f'<script type="application/json" class="head-selector-data">{payload}</script>'
        '<div class="head-selector-static">'
        f'<p class="head-selector-caption">{caption} ({html.escape(scale)}; static picture: on the '
        'course site you can choose the head)</p>'
        f"{static}</div></div>"
    )


def head_selector_html(weights, query_tokens=None, key_tokens=None, head_names=None, title=None, *,
                       group_names=None, group_label="Example", vmin=0.0, vmax=None, digits=3,
                       scale_label="attention weight"):
    """A head selector for attention weights, for a chapter cell's output.

    Parameters
    ----------
    weights : array-like or torch.Tensor
        ``(heads, T_q, T_k)``, or ``(groups, heads, T_q, T_k)`` where the first axis (layers,
        examples, ...) gets a second selector.
    query_tokens : sequence of str, or one such sequence per group, optional
        Row labels, ``T_q`` of them (a list of lists when each group, e.g. each example, has
        its own tokens). None: rows are numbered by position from 1, and on a narrow screen
        every k-th is labelled (tokens are all labelled: the map scrolls if they do not fit).
    key_tokens : sequence of str (or one per group), optional
        Column labels, ``T_k`` of them; defaults to ``query_tokens`` (self-attention), or to
        positions if those are None too.
    head_names : sequence of str, optional
        Defaults to ``head 1`` ... ``head h`` (as in :func:`mha_book.plotting.plot_heads`).
    title : str, optional
        Shown above the selectors.
    group_names, group_label :
        Names for the first axis of 4-D weights (default ``Example 1``, ``Example 2``, ...).
    vmin, vmax : float
        Colour scale; ``vmax`` defaults to 1 for weights in [0, 1], else to their maximum. A list
        of ``vmax``, one per group, gives each group its own scale (the legend follows the group):
        show each map on the scale of the figure it also appears in.
    digits : int
        Decimals kept in the page (3 by default; the page stores every number).
    scale_label : str
        What the colours show, named beside the colour scale and in its text for screen readers.

    Returns
    -------
    IPython.display.HTML
        Make it the last expression of a cell (or ``display(...)`` it).
    """
    from IPython.display import HTML

    return HTML(head_selector_markup(weights, query_tokens, key_tokens, head_names, title,
                                     group_names=group_names, group_label=group_label,
                                     vmin=vmin, vmax=vmax, digits=digits, scale_label=scale_label))
