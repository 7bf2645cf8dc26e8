"""A test case: which function, on which arguments, checked how. Plain data, shared by the
visible tests (in the student's kernel) and the grader (hidden cases, judged outside the sandbox)."""
from dataclasses import dataclass, field

import numpy as np

from . import calling


@dataclass(frozen=True)
class MhaWeights:
    """The weights of a ``torch.nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)``,
    as NumPy arrays in torch's layout: in_proj_weight (3d, d), in_proj_bias (3d,),
    out_proj_weight (d, d), out_proj_bias (d,)."""
    embed_dim: int
    num_heads: int
    weights: dict = field(hash=False)

    def spec(self) -> dict:
        return {"$mha": {"embed_dim": self.embed_dim, "num_heads": self.num_heads,
                         "weights": {k: calling.encode_array(v) for k, v in self.weights.items()}}}


@dataclass(frozen=True)
class AttnWeights:
    """The weights of one causal self-attention layer of the course's decoder (``mha_lib.decoder.
    CausalSelfAttention`` with g = h), NumPy in torch's layout: ``{q,k,v,out}_proj_{weight,bias}``,
    each weight (d_model, d_model), each bias (d_model,)."""
    embed_dim: int
    num_heads: int
    weights: dict = field(hash=False, repr=False)

    def inner(self) -> dict:
        return {"embed_dim": self.embed_dim, "num_heads": self.num_heads,
                "weights": {k: calling.encode_array(v) for k, v in self.weights.items()}}

    def spec(self) -> dict:
        return {"$attn": self.inner()}


@dataclass(frozen=True)
class DecoderWeights:
    """The weights of a pre-norm decoder of the course (``mha_lib.decoder.Decoder``, g = h): ``layers``, each
    a dict of ``attn`` (:class:`AttnWeights`), ``norm1_weight``, ``norm1_bias``, ``norm2_weight``, ``norm2_bias``,
    ``linear1_weight`` (d_ff, d_model), ``linear1_bias``, ``linear2_weight`` (d_model, d_ff), ``linear2_bias``;
    ``final``: the last LayerNorm's {weight, bias}; ``eps``: the LayerNorms' epsilon."""
    layers: tuple = field(hash=False, repr=False)
    final: dict = field(hash=False, repr=False)
    eps: float = 1e-5

    @property
    def num_heads(self) -> int:
        return self.layers[0]["attn"].num_heads

    @property
    def embed_dim(self) -> int:
        return self.layers[0]["attn"].embed_dim

    def spec(self) -> dict:
        def pair(d, name):
            return {"weight": calling.encode_array(d[f"{name}_weight"]), "bias": calling.encode_array(d[f"{name}_bias"])}
        layers = [{"attn": layer["attn"].inner(), **{n: pair(layer, n) for n in ("norm1", "norm2", "linear1", "linear2")}}
                  for layer in self.layers]
        return {"$decoder": {"eps": self.eps, "layers": layers,
                             "norm": {k: calling.encode_array(v) for k, v in self.final.items()}}}


@dataclass(frozen=True)
class Case:
    """One call of a student's function and how its result is checked.

    ``args`` hold plain values: NumPy arrays (a :class:`calling.Tensor` view marks an argument the
    student receives as a torch tensor), numbers, booleans, None, lists of arrays, MhaWeights.
    ``check`` is "values" (compare with the reference), "shape" (only the shape) or "weights"
    (the attention weights are distributions, causal if asked). ``expected`` overrides the
    reference (a worked example's stated answer).
    """
    function: str
    names: tuple
    args: tuple = field(hash=False)
    check: str = "values"
    expected: object = field(default=None, hash=False)

    def specs(self) -> list:
        """The arguments as :func:`calling.call` takes them."""
        return [_spec(a) for a in self.args]


def causal_of(case: Case) -> bool:
    """multi_head_attention's ``causal`` as called: False where the call leaves it out (the prompt's default)."""
    return bool(case.args[4]) if len(case.args) > 4 else False


def _spec(value):
    if isinstance(value, MhaWeights | AttnWeights | DecoderWeights):
        return value.spec()
    if isinstance(value, calling.Tensor):
        return {"$tensor": calling.encode_array(np.asarray(value), keep_layout=True)}
    if isinstance(value, np.ndarray):
        return calling.encode_array(value, keep_layout=True)
    if isinstance(value, list):
        return [_spec(v) for v in value]
    return value
