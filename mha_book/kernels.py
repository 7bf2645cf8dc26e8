"""Which of torch's operators a piece of code ran (chapter 7, tests/test_decoder.py).

torch's attention modules have a fused "fast path" (one operator for a whole encoder layer, or
for a whole attention layer) that they take only when every condition holds: eval mode, no
gradient, an even number of heads, no hooks, ... When one fails they quietly run step by step.
So a comparison "against the fast path" has to show that torch took it::

    with OperatorLog() as log:
        y = layer(x)
    FUSED_LAYER in log.names       # True: the fused encoder layer ran

:class:`OperatorLog` is a ``TorchDispatchMode`` (PyTorch's documented way to see every operator
call, "Extending all torch API with modes"): it records names and changes nothing.
"""
from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode

#: nn.TransformerEncoderLayer's fast path: the whole layer in one operator.
FUSED_LAYER = "aten::_transformer_encoder_layer_fwd"
#: nn.MultiheadAttention's fast path: projections, attention and output projection in one operator.
FUSED_ATTENTION = "aten::_native_multi_head_attention"


class OperatorLog(TorchDispatchMode):
    """Inside ``with OperatorLog() as log:``, ``log.names`` collects each operator torch runs."""

    def __init__(self):
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, op, types, args=(), kwargs=None):
        self.names.add(op.name())
        return op(*args, **(kwargs or {}))
