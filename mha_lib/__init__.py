"""mha_lib: multi-head attention, readable in NumPy and batched in PyTorch.

* :mod:`mha_lib.reference` — NumPy, next to the equations (project, split_heads, merge_heads,
  scaled_dot_product_attention, multi_head_attention and its per-head loop form);
* :class:`mha_lib.MultiHeadAttention` — the function and the ``forward`` of
  ``torch.nn.MultiheadAttention`` (not its ``state_dict`` layout: ``from_torch`` copies one);
* :mod:`mha_lib.counting` — parameters and FLOPs term by term;
* :mod:`mha_lib.block` — a Transformer encoder block around the layer, and positional encoding.
* :mod:`mha_lib.decoder` — grouped-query causal self-attention, a pre-norm decoder stack, a KV cache.

What only the course's pages need (plots, the head viewer, the toy model) is in ``mha_book``.

torch is imported only when ``MultiHeadAttention`` is first used, so NumPy-only work (the
exercise notebooks, the reference) starts in a fraction of a second.
"""
from . import counting, reference

__version__ = "0.1.0"
__all__ = ["MultiHeadAttention", "counting", "reference", "__version__"]


def __getattr__(name: str):
    if name == "MultiHeadAttention":
        from .module import MultiHeadAttention
        return MultiHeadAttention
    raise AttributeError(f"module 'mha_lib' has no attribute {name!r}")
