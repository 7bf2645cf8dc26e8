"""Attention-weight heatmaps for the chapters (matplotlib). No maths here, only pictures."""
import numpy as np
import matplotlib.pyplot as plt


def heatmap(ax, weights, query_tokens=None, key_tokens=None, title=None, annotate=False, vmax=1.0):
    """Draw one (T_q, T_k) weight matrix on ``ax``: rows are queries, columns are keys."""
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 2:
        raise ValueError(f"weights: expected a 2-D (T_q, T_k) matrix, got shape {weights.shape}.")
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=vmax)
    for axis, tokens, setter in ((0, query_tokens, ax.set_yticks), (1, key_tokens, ax.set_xticks)):
        if tokens is not None:
            setter(range(weights.shape[axis]), labels=list(tokens))
    ax.tick_params(axis="x", labelrotation=90)
    if annotate:
        for (i, j), w in np.ndenumerate(weights):
            ax.text(j, i, f"{w:.2f}", ha="center", va="center", fontsize=8,
                    color="black" if w > 0.6 * vmax else "white")
    if title:
        ax.set_title(title)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    return image


def plot_heads(weights, query_tokens=None, key_tokens=None, titles=None, ncols=4, annotate=False, size=2.6,
               vmax=1.0):
    """A grid of heatmaps, one per head, for weights shaped (h, T_q, T_k), sharing the colour scale [0, vmax]."""
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 3:
        raise ValueError(f"weights: expected (h, T_q, T_k) per-head weights, got shape {weights.shape}.")
    h = weights.shape[0]
    ncols = min(ncols, h)
    nrows = -(-h // ncols)  # ceiling division
    fig, axes = plt.subplots(nrows, ncols, figsize=(size * ncols, size * nrows), squeeze=False,
                             layout="constrained")
    titles = titles or [f"head {i + 1}" for i in range(h)]
    for ax, w, title in zip(axes.flat, weights, titles):
        heatmap(ax, w, query_tokens, key_tokens or query_tokens, title, annotate, vmax)
    for ax in axes.flat[h:]:
        ax.axis("off")
    return fig
