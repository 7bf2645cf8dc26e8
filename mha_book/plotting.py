"""Attention-weight heatmaps for the chapters (matplotlib). No maths here, only pictures.

Call :func:`setup` once per notebook: figures then come out as SVG (sharp on any screen, text
stays text) with fonts large enough to read on a phone. Show a figure with :func:`show`, which

* gives it its text alternative: :func:`describe` reads the figure's panels, axes and colour
  scale from the figure itself, and the chapter adds the point it makes, computed like any number;
* gives it a caption and a name: on the site it becomes a numbered figure ("Fig. 5.2") that the
  text points at with ``{numref}`name```; the downloaded notebook prints the same caption under it;
* refuses a figure drawn too wide for a phone: on a 390 px phone every figure is shrunk to the
  text column (:data:`PHONE_COLUMN_PX`), and no label may end up below :data:`MIN_LABEL_PX`.
  Figures are drawn for that width: at most :data:`FIGURE_WIDTH` inches, panels stacked in one or
  two columns (:func:`plot_heads` does it).

The text alternative, caption and name travel in the SVG's metadata (``dc:title``,
``dc:description``, ``dc:identifier``); the site reads them there (site/figures.py).
"""
import io
import re
from collections import defaultdict

import numpy as np
import matplotlib.pyplot as plt
from matplotlib.category import StrCategoryConverter

#: The width, in CSS px, that the course site gives a cell's figure on a 390 px wide phone
#: (measured): every wider figure is shrunk to it there.
PHONE_COLUMN_PX = 342
#: The smallest label size, in CSS px, that a figure may show on that phone (body text is 16 px).
MIN_LABEL_PX = 10.0
#: The widest figure, in inches, whose 10 pt labels (legends) stay above MIN_LABEL_PX there.
FIGURE_WIDTH = 4.6

STYLE = {
    "font.size": 12, "axes.titlesize": 12, "axes.labelsize": 12, "xtick.labelsize": 11,
    "ytick.labelsize": 11, "legend.fontsize": 10, "figure.titlesize": 13,
    "image.interpolation": "none",      # one crisp square per weight (SVG: raw pixels, drawn pixelated)
    "svg.fonttype": "none",             # text stays text in the SVG (smaller, searchable)
}


def setup() -> None:
    """Course style for every later figure: larger fonts, SVG output in Jupyter and on the site."""
    plt.rcParams.update(STYLE)
    try:
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # not running under IPython: nothing to configure
        return
    set_matplotlib_formats("svg")


def _one_based(axis, n: int) -> None:
    """Ticks labelled 1, 2, ... (positions are counted from 1 in the text): every one up to 10
    positions, else 1 and every multiple of 5 (up to 20) or of 10."""
    step = 1 if n <= 10 else 5 if n <= 20 else 10
    ticks = sorted({0, *range(step - 1, n, step)})
    axis.set_ticks(ticks, labels=[str(t + 1) for t in ticks])


def heatmap(ax, weights, query_tokens=None, key_tokens=None, title=None, annotate=False, vmax=1.0,
            vmin=0.0, colorbar=False):
    """Draw one (T_q, T_k) weight matrix on ``ax``: rows are queries, columns are keys.

    Without tokens the axes count positions from 1. ``colorbar=True`` adds a colour bar.
    """
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 2:
        raise ValueError(f"weights: expected a 2-D (T_q, T_k) matrix, got shape {weights.shape}.")
    image = ax.imshow(weights, cmap="viridis", vmin=vmin, vmax=vmax)
    for axis, tokens, which in ((0, query_tokens, ax.yaxis), (1, key_tokens, ax.xaxis)):
        if tokens is None:
            _one_based(which, weights.shape[axis])
        else:
            which.set_ticks(range(weights.shape[axis]), labels=list(tokens))
    if key_tokens is not None:
        ax.tick_params(axis="x", labelrotation=90)
    if annotate:
        for (i, j), w in np.ndenumerate(weights):
            ax.text(j, i, f"{w:.2f}", ha="center", va="center", fontsize=11,
                    color="black" if w > vmin + 0.6 * (vmax - vmin) else "white")
    if title:
        ax.set_title(title)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if colorbar:
        ax.figure.colorbar(image, ax=ax, shrink=0.8, label="weight")
    return image


def plot_heads(weights, query_tokens=None, key_tokens=None, titles=None, ncols=2, annotate=False, size=None,
               vmax=1.0):
    """A grid of heatmaps, one per head, for weights shaped (h, T_q, T_k), with one colour bar.

    Drawn for a phone: ``ncols`` panels a row (2 by default), the grid :data:`FIGURE_WIDTH` wide,
    the colour bar underneath. Every head shares the colour scale [0, vmax]; ``vmax=None`` takes
    the largest weight of all heads (still one scale for the whole grid).
    """
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 3:
        raise ValueError(f"weights: expected (h, T_q, T_k) per-head weights, got shape {weights.shape}.")
    vmax = float(weights.max()) if vmax is None else vmax
    h = weights.shape[0]
    ncols = min(ncols, h)
    nrows = -(-h // ncols)  # ceiling division
    size = (FIGURE_WIDTH - 0.2) / ncols if size is None else size   # square panels filling the width
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols + 0.2, size * nrows + 0.9), squeeze=False,
                             layout="constrained")
    titles = titles or [f"head {i + 1}" for i in range(h)]
    for ax, w, title in zip(axes.flat, weights, titles):
        image = heatmap(ax, w, query_tokens, key_tokens or query_tokens, title, annotate, vmax)
    for ax in axes.flat[h:]:
        ax.axis("off")
    for ax in axes.flat[:h]:  # label the outer axes only: more room for the maps
        if not ax.get_subplotspec().is_last_row():
            ax.set_xlabel("")
        if not ax.get_subplotspec().is_first_col():
            ax.set_ylabel("")
    fig.colorbar(image, ax=axes, location="bottom", shrink=0.8, aspect=30, label="attention weight")
    return fig


def _plain(text: str) -> str:
    """Axis text without TeX markup: ``$d_{\\mathrm{model}}$`` -> ``d_model``."""
    text = re.sub(r"\\(?:mathrm|mathbf|operatorname)\{([^}]*)\}", r"\1", text)
    return " ".join(re.sub(r"[$\\{}]", "", text).split())


def _axis(ax, which: str) -> tuple[str, str]:
    """(label, tick range) of one axis, e.g. ("query", "the to mat")."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    if not ax.axison:                                            # a drawing (axis("off")): no axes to read
        return "", ""
    if ax.images or isinstance(axis.get_converter(), StrCategoryConverter):   # rows/columns, categories
        ticks = [_plain(t.get_text()) for t in axis.get_ticklabels() if t.get_text()]
        span = f"{ticks[0]} to {ticks[-1]}" if len(ticks) > 1 else ""
    elif axis.get_ticklabels() and (values := _data_range(ax, which)):   # numbers: what the data span
        span = "{:.3g} to {:.3g}".format(*values) + (" (log scale)" if axis.get_scale() == "log" else "")
    else:
        span = ""
    return _plain(axis.get_label_text()), span


def _data_range(ax, which: str) -> tuple[float, float] | None:
    """The smallest and largest value that the panel's lines, points, bars and reference lines take
    along one axis: matplotlib's data limits, not its view limits, which it pads by 5 % (a loss
    from 0.1 to 4.5 is drawn from -0.13 to 4.76). None if nothing is drawn in data units."""
    box = ax.dataLim
    low, high = (box.x0, box.x1) if which == "x" else (box.y0, box.y1)
    return (low, high) if np.isfinite([low, high]).all() and low <= high else None


def describe(fig) -> str:
    """What a figure shows, read from it: its title, then its panels grouped by kind (heatmap,
    line chart) with their titles, axes and colour scale."""
    groups = defaultdict(list)
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>" or not ax.has_data():
            continue
        kind = "heatmap" if ax.images else "line chart" if ax.lines else "chart"
        scale = ("colour from {:g} to {:.3g}".format(*ax.images[0].get_clim()) if ax.images else "")
        groups[(kind, _axis(ax, "x")[1], _axis(ax, "y")[1], scale)].append(ax)
    parts = []
    for (kind, x_span, y_span, scale), axes in groups.items():
        titles = [_plain(ax.get_title()) for ax in axes if ax.get_title()]
        x_label = next((_axis(ax, "x")[0] for ax in axes if ax.get_xlabel()), "")
        y_label = next((_axis(ax, "y")[0] for ax in axes if ax.get_ylabel()), "")
        what = f"{len(axes)} {kind}s" if len(axes) > 1 else f"a {kind}"
        text = what + (f" ({'; '.join(titles)})" if titles else "")
        axes_text = [" ".join(filter(None, (side, label, span))) for side, label, span in
                     (("across:", x_label, x_span), ("down:", y_label, y_span)) if label or span]
        lines = sorted({_plain(line.get_label()) for ax in axes for line in ax.lines
                        if not line.get_label().startswith("_")})
        extra = axes_text + ([scale] if scale else []) + ([f"lines: {', '.join(lines)}"] if lines else [])
        parts.append(text + (", " + ", ".join(extra) if extra else ""))
    title = _plain(fig._suptitle.get_text()) + ". " if fig._suptitle else ""
    return title + "; ".join(parts) + "."


_TEXT = re.compile(r"<text\b.*?</text>", re.S)
_FONT = re.compile(r"font(?:-size)?:\s*([\d.]+)px")
_WIDTH = re.compile(r'<svg[^>]*\bwidth="([\d.]+)pt"')


def label_sizes(svg: str) -> tuple[float, list[float]]:
    """(width, size of each label) of a matplotlib SVG, both in its user unit, the point.

    A label is a ``<text>``; its size is its largest font (a formula's sub- and superscripts are
    smaller tspans of the same label).
    """
    sizes = [max(map(float, _FONT.findall(text))) for text in _TEXT.findall(svg) if _FONT.search(text)]
    return float(_WIDTH.search(svg).group(1)), sizes


def phone_label_px(svg: str) -> float:
    """The smallest label of an SVG figure, in CSS px, once shrunk to PHONE_COLUMN_PX."""
    width_pt, sizes = label_sizes(svg)
    scale = min(1.0, PHONE_COLUMN_PX / (width_pt * 96 / 72))        # a figure is never enlarged
    return min(sizes, default=float("inf")) * 96 / 72 * scale


def show(fig, point: str, *, caption: str | None = None, name: str | None = None) -> None:
    """Display ``fig`` as SVG with its text alternative: :func:`describe` plus ``point``, the
    sentence (computed in the cell) that says what the reader should see in it.

    ``caption`` (a sentence, ``$...$`` for maths) and ``name`` (``"fig-cost"``) make it a
    numbered figure on the site, which the text cites with ``{numref}`fig-cost```. A figure whose
    labels would shrink below :data:`MIN_LABEL_PX` on a phone is refused (ValueError).
    """
    from IPython.display import SVG, display

    if caption is not None and not (name and re.fullmatch(r"[a-z][a-z0-9-]*", name)):
        plt.close(fig)                                  # refused or shown, the figure is done with
        raise ValueError(f"name: a figure with a caption needs a name such as 'fig-cost' (lower case, "
                         f"digits, hyphens), so that the text can cite it; got {name!r}.")
    alt = f"{describe(fig)} {point.strip()}"
    metadata = {"Title": alt, "Date": None}
    if caption is not None:
        metadata.update(Description=" ".join(caption.split()), Identifier=name)
    buffer = io.StringIO()
    with plt.rc_context({"svg.fonttype": "none"}):     # text stays text: its size can be checked
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata=metadata)
    width_in = fig.get_size_inches()[0]
    plt.close(fig)
    svg = buffer.getvalue()
    smallest = phone_label_px(svg)
    if smallest < MIN_LABEL_PX:
        raise ValueError(
            f"figure too wide for a phone: drawn {width_in:.1f} in wide, its smallest label shrinks to "
            f"{smallest:.1f} CSS px on a 390 px phone (at least {MIN_LABEL_PX:g} px). Draw it at most "
            f"{FIGURE_WIDTH} in wide (plotting.FIGURE_WIDTH): stack the panels (plot_heads(..., ncols=2), "
            "plt.subplots(n, 1)).")
    display(SVG(svg))


# --- the layer's architecture, drawn with the shapes of a real run ---

def layer_shapes(query, key, value, params, mask=None) -> dict[str, tuple]:
    """Run the NumPy reference step by step and record the shape after each step."""
    from mha_lib import reference as R  # the maths; only the figure needs it here

    q, k, v = (R.project(x, w, b) for x, w, b in ((query, params.w_q, params.b_q),
                                                  (key, params.w_k, params.b_k),
                                                  (value, params.w_v, params.b_v)))
    qh, kh, vh = (R.split_heads(t, params.num_heads) for t in (q, k, v))  # (..., h, T, d_k)
    heads, weights = R.scaled_dot_product_attention(qh, kh, vh, mask)    # (..., h, T_q, d_v)
    concat = R.merge_heads(heads)                                        # (..., T_q, h*d_v)
    out = R.output_projection(concat, params.w_o, params.b_o)
    named = {"query": query, "key": key, "value": value, "Q": q, "K": k, "V": v,
             "Q heads": qh, "K heads": kh, "V heads": vh, "weights": weights, "heads": heads,
             "concat": concat, "output": out}
    return {name: tuple(np.shape(t)) for name, t in named.items()}


def _box(ax, x, y, text, width, colour, height=0.62):
    ax.add_patch(plt.Rectangle((x - width / 2, y - height / 2), width, height, facecolor=colour,
                               edgecolor="#333333", linewidth=1.0))
    ax.text(x, y, text, ha="center", va="center", fontsize=10.5)


def _arrow(ax, x0, y0, x1, y1):
    ax.annotate("", (x1, y1), (x0, y0), arrowprops={"arrowstyle": "->", "color": "#333333", "lw": 1.0})


def architecture(shapes: dict[str, tuple], num_heads: int, title: str | None = None):
    """The multi-head attention layer as a bottom-up block diagram (narrow enough for a phone),
    each arrow labelled with the shape :func:`layer_shapes` recorded there."""
    fmt = lambda name: "(" + ", ".join(map(str, shapes[name])) + ")"  # noqa: E731
    fig, ax = plt.subplots(figsize=(4.6, 7.4), layout="constrained")
    ax.set(xlim=(0, 3), ylim=(-0.5, 7.6))
    ax.axis("off")
    cols = (0.5, 1.5, 2.5)
    for x, name, role in zip(cols, ("query", "key", "value"), "QKV"):
        _box(ax, x, 0, f"{name}\n{fmt(name)}", 0.92, "#e8e8e8")
        _arrow(ax, x, 0.31, x, 0.89)
        _box(ax, x, 1.2, f"Linear $W^{role}$\n{fmt(role)}", 0.92, "#cfe3f3")
        _arrow(ax, x, 1.51, x, 2.09)
        _box(ax, x, 2.4, f"split\n{fmt(role + ' heads')}", 0.92, "#cfe3f3")
        _arrow(ax, x, 2.71, x, 3.19)
    for depth in (2, 1):  # the copies behind: one attention per head
        ax.add_patch(plt.Rectangle((0.1 + 0.06 * depth, 3.2 + 0.08 * depth), 2.8, 1.1, facecolor="#f6e3c3",
                                   edgecolor="#999999", linewidth=0.8))
    _box(ax, 1.5, 3.75, f"scaled dot-product attention,\n{num_heads} heads side by side\n"
         f"weights {fmt('weights')}\nheads {fmt('heads')}", 2.8, "#f6d8a8", height=1.1)
    _arrow(ax, 1.5, 4.31, 1.5, 4.89)
    _box(ax, 1.5, 5.2, f"concat (merge heads)\n{fmt('concat')}", 2.0, "#d9ecd0")
    _arrow(ax, 1.5, 5.51, 1.5, 6.09)
    _box(ax, 1.5, 6.4, f"Linear $W^O$\n{fmt('output')}", 2.0, "#cfe3f3")
    _arrow(ax, 1.5, 6.71, 1.5, 7.3)
    ax.text(1.5, 7.42, "output", ha="center", va="center", fontsize=10.5)
    if title:
        ax.set_title(title)
    return fig
