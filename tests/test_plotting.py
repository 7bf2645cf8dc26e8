"""mha_book.plotting: one shared colour scale with a colour bar, positions counted from 1, text
alternatives that quote the data's ranges."""
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


def test_describe_quotes_the_range_of_the_data_not_the_padded_axes():
    """matplotlib pads each axis by 5 % of the data's span: a description that read the axes'
    limits quoted values no point has (a loss of "-0.13 to 4.76", a "time step -9.9")."""
    fig, axes = plt.subplots(3, 1)
    steps = np.arange(1, 21)                                   # 1..20
    axes[0].plot(steps, np.linspace(0.1, 4.5, 20), label="loss")
    axes[0].axhline(3.26, ls=":")                              # a reference line counts as data
    axes[0].set(xlabel="position", ylabel="loss")
    axes[1].bar(["a", "b", "c"], [2.0, 5.0, 3.0])              # bars stand on 0
    axes[1].set(ylabel="count")
    axes[2].scatter([-30, 70], [0.25, 0.75])
    axes[2].set(xlabel="time step", ylabel="share")
    text = plotting.describe(fig)
    assert "across: position 1 to 20, down: loss 0.1 to 4.5" in text, text
    assert "across: a to c, down: count 0 to 5" in text, text          # categories by name
    assert "across: time step -30 to 70, down: share 0.25 to 0.75" in text, text
    assert all(f"{ax.get_xlim()[0]:.3g}" not in text for ax in axes[[0, 2]]), text   # no padded limit
    plt.close(fig)
    fig, ax = plt.subplots()
    ax.loglog([64, 512], [65.0, 513.0], "o-")
    ax.set(xlabel="prefix length T", ylabel="ratio")
    assert "across: prefix length T 64 to 512 (log scale), down: ratio 65 to 513 (log scale)" in plotting.describe(fig)
    plt.close(fig)
    fig, ax = plt.subplots()                                   # a drawing: its axes are switched off
    ax.add_patch(plt.Rectangle((0.2, 0.2), 0.5, 0.5))
    ax.set(xlim=(0, 3), ylim=(-0.5, 7.6))
    ax.axis("off")
    assert plotting.describe(fig) == "a chart.", plotting.describe(fig)
    plt.close(fig)


def test_show_puts_the_text_alternative_in_the_svg(weights, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", shown.append)
    fig = plotting.plot_heads(weights)
    plotting.show(fig, "Head 2 & head 3 agree.")
    svg = shown[0].data
    assert "<dc:title>3 heatmaps (head 1; head 2; head 3)" in svg and "Head 2 &amp; head 3 agree.</dc:title>" in svg
    assert "<dc:date>" not in svg and not plt.get_fignums()       # reproducible; the figure is closed
