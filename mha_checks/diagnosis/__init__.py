"""One check per graded function, one module per exercise: the reference, the shapes with axis names,
and the diagnosis (``common`` holds what they share, ``errors`` the diagnosis of a call that raised).

Each ``check`` raises :class:`Fail` with one plain message, or returns when the answer is right.
A mistake is named only when it is verified: a catalogued variant (:mod:`mha_checks.variants`,
:mod:`mha_checks.attention`) reproduces the student's numbers on this case; otherwise the message
says what was observed (where the numbers first depart, the shape got against the one expected).
"""
import numpy as np

from .. import variants
from ..arrays import dims
from . import assembly, fuse, linear, merge, per_head, split
from .common import Fail, Spec
from .errors import error_fail

SPECS = {
    "project": Spec(linear._describe_linear("project", "w", "b", "d_in, d_out", "B, T, d_in"),
                    linear._check_linear("w", "b", "B, T, d_out", variants.linear_switches("w", "b", "the product",
                                                                                           "(d_in, d_out)")),
                    linear._linear_sizes),
    "fuse_heads": Spec(fuse._describe_fuse, fuse._check_fuse, fuse._fuse_sizes),
    "split_heads": Spec(lambda c: f"split_heads(x, num_heads={c.args[1]}) with x {dims('B, T, d', np.shape(c.args[0]))}",
                        split._check_split, split._split_sizes),
    "merge_heads": Spec(lambda c: f"merge_heads(x) with x {dims('B, h, T, d_v', np.shape(c.args[0]))}",
                        merge._check_merge, merge._merge_sizes),
    "output_projection": Spec(linear._describe_linear("output_projection", "w_o", "b_o", "h*d_v, d_model",
                                                      "B, T, h*d_v"),
                              linear._check_linear("w_o", "b_o", "B, T, d_model",
                                                   variants.linear_switches("w_o", "b_o", "W^O", "(h*d_v, d_model)")),
                              linear._linear_sizes),
    "output_projection_per_head": Spec(per_head._describe_per_head, per_head._check_per_head, per_head._per_head_sizes),
    "multi_head_attention": Spec(assembly._describe_mha, assembly._check_mha, assembly._mha_sizes),
}

__all__ = ["SPECS", "Fail", "Spec", "error_fail"]
