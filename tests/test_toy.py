"""mha_book.toy: the "previous and first" model of chapters 2 and 3 learns what the chapters claim.

Chapter 3 states that the default two-head model answers both questions on held-out sequences,
that each head ends up serving one question, and that switching a head off breaks only that
head's question. Training takes about two seconds on one core.
"""
import pytest
import torch

from mha_book import toy


@pytest.fixture(scope="module")
def trained():
    cfg = toy.ToyConfig()
    model, losses = toy.train(cfg)
    x, y = toy.test_set(cfg)
    return cfg, model, losses, x, y


def test_batch_shapes_and_targets():
    cfg = toy.ToyConfig()
    x, y = toy.make_batch(5, cfg, torch.Generator().manual_seed(0))
    assert x.shape == (5, cfg.seq_len) and y.shape == (5, cfg.seq_len - 1, 2)
    assert torch.equal(y[..., 0], x[:, :-1])                       # previous letter
    assert torch.equal(y[..., 1], x[:, :1].expand(-1, cfg.seq_len - 1))  # first letter


def test_reaches_full_accuracy(trained):
    _, model, losses, x, y = trained
    acc = toy.accuracy(model, x, y)
    assert acc["previous"] >= 0.99 and acc["first"] >= 0.99, acc
    assert losses[-1] < 0.01


def test_heads_split_the_work(trained):
    cfg, model, _, x, y = trained
    focus = toy.head_focus(toy.attention(model, x))[0]  # (h, 2): weight on previous, on first
    serves = focus.argmax(dim=-1)                        # the question each head serves
    assert sorted(serves.tolist()) == [0, 1], focus      # one head per question
    assert (focus.max(dim=-1).values > 0.9).all(), focus
    for head, part in enumerate(serves.tolist()):
        acc = toy.ablation(model, x, y)[(0, head)]
        other = 1 - part
        assert acc[toy.PARTS[part]] < 0.3, acc           # its own question breaks
        assert acc[toy.PARTS[other]] >= 0.99, acc        # the other one does not


def test_weights_path_matches_fused_path(trained):
    _, model, _, x, _ = trained
    with torch.no_grad():
        fused, _ = model(x[:50])
        explicit, w = model(x[:50], need_weights=True)
    torch.testing.assert_close(fused, explicit, rtol=1e-5, atol=1e-5)
    assert w.shape == (1, 50, 2, 8, 8)
    assert torch.allclose(w.sum(-1), torch.ones(()), atol=1e-6)
    assert (w.triu(1) == 0).all()                        # causal: nothing from the future


def test_training_is_reproducible(trained):
    cfg, model, _, _, _ = trained
    again, _ = toy.train(cfg)
    for (name, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), name
    start = toy.init_model(cfg)
    assert not torch.equal(start.tok.weight, model.tok.weight)  # training moved the weights


@pytest.mark.parametrize("seed", [0, 2])
def test_single_head_outcomes_the_chapter_reports(trained, seed):
    """Chapter 3's "math minute": with torch's initialisation and twice the steps, one head of
    full width answers both questions by spreading its weight over both positions."""
    cfg, _, _, x, y = trained
    model, _ = toy.train(toy.ToyConfig(num_heads=1, seed=seed, steps=2 * cfg.steps))
    acc = toy.accuracy(model, x, y)
    on_prev, on_first = toy.head_focus(toy.attention(model, x))[0, 0].tolist()
    assert min(acc.values()) > 0.9, acc
    assert 0.3 < on_prev < 0.7 and 0.3 < on_first < 0.7, (on_prev, on_first)


def test_training_draws_are_what_training_sees(monkeypatch):
    cfg = toy.ToyConfig(steps=3, batch=5)
    seen = []
    forward = toy.ToyModel.forward

    def recording(self, x, **kwargs):
        seen.append(x)
        return forward(self, x, **kwargs)

    monkeypatch.setattr(toy.ToyModel, "forward", recording)
    toy.train(cfg)
    assert torch.equal(torch.cat(seen), toy.training_draws(cfg))


def test_held_out_sequences_were_never_drawn_in_training():
    """Chapters 2 and 3 evaluate on held-out sequences that no training run of theirs drew."""
    cfg, runs = toy.ToyConfig(), [toy.ToyConfig(seed=s, steps=400) for s in range(2)]
    for unseen_by in (None, runs):
        x, y = toy.test_set(cfg, unseen_by=unseen_by)
        seen = {tuple(s) for c in (unseen_by or [cfg]) for s in toy.training_draws(c).tolist()}
        assert x.shape == (2000, cfg.seq_len) and torch.equal(y, toy.answers(x))
        assert not any(tuple(s) in seen for s in x.tolist())
    plain, _ = toy.make_batch(2000, cfg, torch.Generator().manual_seed(1234))
    assert any(tuple(s) in seen for s in plain.tolist())   # without the filter, some were
