"""Attention-weight heatmaps for the chapters (matplotlib). No maths here, only pictures.

Call :func:`setup` once per notebook: figures then come out as SVG (sharp on any screen, text
stays text) with fonts large enough to read on a phone.
"""
import numpy as np
import matplotlib.pyplot as plt

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


def plot_heads(weights, query_tokens=None, key_tokens=None, titles=None, ncols=4, annotate=False, size=2.6,
               vmax=1.0):
    """A grid of heatmaps, one per head, for weights shaped (h, T_q, T_k), with one colour bar.

    Every head shares the colour scale [0, vmax]; ``vmax=None`` takes the largest weight of all
    heads (still one scale for the whole grid).
    """
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 3:
        raise ValueError(f"weights: expected (h, T_q, T_k) per-head weights, got shape {weights.shape}.")
    vmax = float(weights.max()) if vmax is None else vmax
    h = weights.shape[0]
    ncols = min(ncols, h)
    nrows = -(-h // ncols)  # ceiling division
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols + 1.0, size * nrows), squeeze=False,
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
    fig.colorbar(image, ax=axes, shrink=0.8 if nrows > 1 else 1.0, label="attention weight")
    return fig
