"""mha_book.plotting: one shared colour scale with a colour bar, positions counted from 1."""
import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from mha_book import plotting  # noqa: E402


@pytest.fixture
def weights():
    return np.random.default_rng(0).dirichlet(np.ones(12), size=(3, 7))  # (h=3, T_q=7, T_k=12)


def test_plot_heads_shares_one_scale_and_adds_a_colour_bar(weights):
    fig = plotting.plot_heads(weights, ncols=2, vmax=None)
    images = [ax.images[0] for ax in fig.axes if ax.images and ax.get_label() != "<colorbar>"]
    assert len(images) == 3
    assert {im.get_clim() for im in images} == {(0.0, float(weights.max()))}  # vmax=None: data max
    assert any(ax.get_label() == "<colorbar>" for ax in fig.axes)
    plt.close(fig)


def test_positions_are_counted_from_one(weights):
    fig, ax = plt.subplots()
    plotting.heatmap(ax, weights[0], vmax=1.0)
    x_labels = [t.get_text() for t in ax.get_xticklabels()]
    y_labels = [t.get_text() for t in ax.get_yticklabels()]
    assert x_labels[0] == "1" and x_labels[-1] == "10"   # 12 keys: 1, 5, 10
    assert y_labels == [str(i) for i in range(1, 8)]     # 7 queries: every one
    plt.close(fig)


def test_tokens_label_the_axes(weights):
    fig, ax = plt.subplots()
    tokens = list("abcdefghijkl")
    plotting.heatmap(ax, weights[0], tokens[:7], tokens, colorbar=True)
    assert [t.get_text() for t in ax.get_xticklabels()] == tokens
    assert len(fig.axes) == 2                             # the map and its colour bar
    plt.close(fig)


def test_setup_enlarges_the_fonts():
    plotting.setup()
    assert plt.rcParams["font.size"] >= 12 and plt.rcParams["image.interpolation"] == "none"


def test_wrong_rank_is_refused():
    with pytest.raises(ValueError, match="expected"):
        plotting.plot_heads(np.zeros((3, 3)))


def test_architecture_labels_the_shapes_of_a_real_run():
    from mha_lib import reference as R
    rng = np.random.default_rng(1)
    params = R.init_params(12, 3, rng)                        # d=12, h=3, d_k=4
    query, memory = rng.normal(size=(2, 5, 12)), rng.normal(size=(2, 7, 12))  # T_q=5, T_k=7
    shapes = plotting.layer_shapes(query, memory, memory, params)
    assert shapes["Q heads"] == (2, 3, 5, 4) and shapes["K heads"] == (2, 3, 7, 4)
    assert shapes["weights"] == (2, 3, 5, 7) and shapes["concat"] == (2, 5, 12)
    assert shapes["output"] == query.shape
    fig = plotting.architecture(shapes, 3)
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "(2, 3, 5, 7)" in texts and "3 heads" in texts and "(2, 3, 7, 4)" in texts
    plt.close(fig)


def test_describe_reads_panels_axes_and_scale_from_the_figure(weights):
    fig = plotting.plot_heads(weights, query_tokens=list("abcdefg"), key_tokens=[f"k{i}" for i in range(12)],
                              titles=["first", "second", "third"], ncols=2, vmax=None)
    fig.suptitle(r"Heads of $W^O$")
    text = plotting.describe(fig)
    assert text.startswith("Heads of W^O. 3 heatmaps (first; second; third)"), text
    assert "across: key k0 to k11" in text and "down: query a to g" in text
    assert f"colour from 0 to {weights.max():.3g}" in text
    plt.close(fig)
    fig, ax = plt.subplots()
    ax.loglog([16, 4096], [1.0, 9.0], label=r"cost $8nd^2$")
    ax.set(xlabel="sequence length n", ylabel=r"MACs, $d_{\mathrm{model}}$")
    text = plotting.describe(fig)
    assert "a line chart" in text and "(log scale)" in text and "lines: cost 8nd^2" in text
    assert "MACs, d_model" in text and "$" not in text and "\\" not in text
    plt.close(fig)


def test_show_puts_the_text_alternative_in_the_svg(weights, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", shown.append)
    fig = plotting.plot_heads(weights)
    plotting.show(fig, "Head 2 & head 3 agree.")
    svg = shown[0].data
    assert "<dc:title>3 heatmaps (head 1; head 2; head 3)" in svg and "Head 2 &amp; head 3 agree.</dc:title>" in svg
    assert "<dc:date>" not in svg and not plt.get_fignums()       # reproducible; the figure is closed
