"""A toy task that asks two questions at once, and the tiny attention model that learns it.

The task ("previous and first", used in chapters 2 and 3): a sequence of ``seq_len`` random
letters; at every position t >= 1 the model answers two questions,

* which letter came just before me?   (the letter at t - 1: look one step back)
* which letter opened the sequence?   (the letter at 0: look at the first position)

Both answers sit at other positions, at different offsets, so the natural solution gives each
question its own head. The model is a causal, attention-only transformer built from
:class:`mha_lib.MultiHeadAttention`: token + position embeddings, ``num_layers`` residual
attention layers, then one linear read-out that scores the letters for both questions (its
``2 * vocab`` outputs are two sets of letter scores, one per question).

Everything is seeded: :func:`train` returns the same weights every time it is called with the
same :class:`ToyConfig`. The default run takes a couple of seconds on one CPU core.
"""
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mha_lib.module import MultiHeadAttention

LETTERS = "abcdefghijklmnopqrstuvwxyz"
PARTS = ("previous", "first")  # the two questions, in the order of the read-outs


@dataclass
class ToyConfig:
    vocab: int = 8          # letters a..h
    seq_len: int = 8
    d_model: int = 32
    num_heads: int = 2
    num_layers: int = 1
    steps: int = 200
    batch: int = 128
    lr: float = 1e-2
    seed: int = 0


def make_batch(n: int, cfg: ToyConfig, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """Random sequences and their answers: tokens (n, T), targets (n, T-1, 2) for t = 1..T-1."""
    x = torch.randint(cfg.vocab, (n, cfg.seq_len), generator=gen)  # (n, T)
    return x, answers(x)


def answers(x: Tensor) -> Tensor:
    """The two answers at every position t = 1..T-1 of sequences x (n, T): (n, T-1, 2)."""
    prev = x[:, :-1]                                               # (n, T-1): letter at t-1
    first = x[:, :1].expand(-1, x.shape[1] - 1)                    # (n, T-1): letter at 0
    return torch.stack([prev, first], dim=-1)                      # (n, T-1, 2)


def training_draws(cfg: ToyConfig) -> Tensor:
    """Every sequence :func:`train` draws for ``cfg``, in order: (steps * batch, T).

    The batches come from a generator of their own, so replaying it gives them without training.
    """
    gen = torch.Generator().manual_seed(cfg.seed)
    return torch.cat([make_batch(cfg.batch, cfg, gen)[0] for _ in range(cfg.steps)])


def test_set(cfg: ToyConfig, n: int = 2000, seed: int = 1234,
             unseen_by: Iterable[ToyConfig] | None = None) -> tuple[Tensor, Tensor]:
    """n held-out sequences from their own generator, none of them drawn in training.

    A sequence that the training runs of ``unseen_by`` (default: ``cfg`` alone) drew is skipped,
    and the generator draws on until n are kept. Returns tokens (n, T) and answers (n, T-1, 2).
    """
    seen = {tuple(s) for c in (unseen_by or [cfg]) for s in training_draws(c).tolist()}
    gen, kept = torch.Generator().manual_seed(seed), []
    while len(kept) < n:
        kept += [s for s in make_batch(n, cfg, gen)[0].tolist() if tuple(s) not in seen]
    x = torch.tensor(kept[:n])                                      # (n, T)
    return x, answers(x)


class ToyModel(nn.Module):
    """Embeddings -> num_layers x (h = h + MHA(h), causal) -> one read-out, letter scores per question."""

    def __init__(self, cfg: ToyConfig):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.layers = nn.ModuleList(MultiHeadAttention(cfg.d_model, cfg.num_heads, batch_first=True)
                                    for _ in range(cfg.num_layers))
        self.readout = nn.Linear(cfg.d_model, len(PARTS) * cfg.vocab)
        self.ablated: set[tuple[int, int]] = set()  # (layer, head) pairs whose output is zeroed
        for i, layer in enumerate(self.layers):
            layer.out_proj.register_forward_pre_hook(self._ablation_hook(i))

    def _ablation_hook(self, layer_index: int):
        """Zero an ablated head's slice of Concat(head_1, ..., head_h) just before W^O."""
        d_k = self.cfg.d_model // self.cfg.num_heads

        def hook(_module, args):
            concat = args[0]                                   # (N, T, h*d_k)
            keep = torch.ones(concat.shape[-1], dtype=concat.dtype)
            for layer, head in self.ablated:
                if layer == layer_index:
                    keep[head * d_k:(head + 1) * d_k] = 0.0
            return (concat * keep,)
        return hook

    def forward(self, x: Tensor, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """tokens (N, T) -> logits (N, T, 2, vocab) and, if asked, weights (layers, N, h, T, T)."""
        n, t = x.shape
        h = self.tok(x) + self.pos(torch.arange(t))            # (N, T, d_model)
        blocked = torch.ones(t, t, dtype=torch.bool).triu(1)   # (T, T), torch style: True = may NOT attend
        weights = []
        for layer in self.layers:
            out, w = layer(h, h, h, attn_mask=blocked, need_weights=need_weights,
                           average_attn_weights=False)         # out (N, T, d_model), w (N, h, T, T)
            h = h + out
            weights.append(w)
        logits = self.readout(h).view(n, t, len(PARTS), self.cfg.vocab)  # (N, T, 2, vocab)
        return logits, torch.stack(weights) if need_weights else None


def loss_fn(logits: Tensor, targets: Tensor) -> Tensor:
    """Cross-entropy over positions 1..T-1 and both questions."""
    return F.cross_entropy(logits[:, 1:].reshape(-1, logits.shape[-1]), targets.reshape(-1))


@contextmanager
def _one_thread():
    """A model this small trains several times faster on one thread than on two."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def init_model(cfg: ToyConfig) -> ToyModel:
    """The untrained model that :func:`train` starts from (same seed, same weights)."""
    torch.manual_seed(cfg.seed)
    return ToyModel(cfg)


def train(cfg: ToyConfig | None = None) -> tuple[ToyModel, list[float]]:
    """Adam on freshly sampled batches; returns the model (eval mode) and the loss of every step."""
    cfg = cfg or ToyConfig()
    model = init_model(cfg)
    gen = torch.Generator().manual_seed(cfg.seed)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    losses = []
    with _one_thread():
        for _ in range(cfg.steps):
            x, y = make_batch(cfg.batch, cfg, gen)
            loss = loss_fn(model(x)[0], y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return model.eval(), losses


@torch.no_grad()
def accuracy(model: ToyModel, x: Tensor, targets: Tensor) -> dict[str, float]:
    """Fraction of positions 1..T-1 answered correctly, per question."""
    hit = (model(x)[0][:, 1:].argmax(-1) == targets).float()  # (N, T-1, 2)
    return {part: hit[..., i].mean().item() for i, part in enumerate(PARTS)}


@torch.no_grad()
def attention(model: ToyModel, x: Tensor) -> Tensor:
    """Every head's weights on x: (layers, N, h, T, T)."""
    return model(x, need_weights=True)[1]


def head_focus(weights: Tensor) -> Tensor:
    """Mean weight each head puts on the previous and on the first position: (layers, h, 2).

    Averaged over queries t = 2..T-1 (at t = 1 the previous position *is* the first one).
    """
    t = torch.arange(2, weights.shape[-1])
    on_prev = weights[..., t, t - 1].mean(dim=(1, 3))  # (layers, N, h, T-2) -> (layers, h)
    on_first = weights[..., t, 0].mean(dim=(1, 3))     # (layers, h)
    return torch.stack([on_prev, on_first], dim=-1)    # (layers, h, 2), same order as PARTS


def ablation(model: ToyModel, x: Tensor, targets: Tensor) -> dict[tuple[int, int], dict[str, float]]:
    """Accuracy with one head switched off, for every (layer, head)."""
    out = {}
    for layer in range(model.cfg.num_layers):
        for head in range(model.cfg.num_heads):
            model.ablated = {(layer, head)}
            try:
                out[(layer, head)] = accuracy(model, x, targets)
            finally:
                model.ablated = set()
    return out


def letters(x: Tensor) -> str:
    """One sequence (T,) as a string of letters, e.g. 'cahbddgf'."""
    return "".join(LETTERS[int(v)] for v in x)
