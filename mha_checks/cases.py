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
    if isinstance(value, MhaWeights):
        return value.spec()
    if isinstance(value, calling.Tensor):
        return {"$tensor": calling.encode_array(np.asarray(value), keep_layout=True)}
    if isinstance(value, np.ndarray):
        return calling.encode_array(value, keep_layout=True)
    if isinstance(value, list):
        return [_spec(v) for v in value]
    return value
