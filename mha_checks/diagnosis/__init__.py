"""One check per graded function, one module per exercise: the reference, the shapes with axis names,
the observation of one call, and the catalogue of mistakes (``common`` holds what they share,
``errors`` the observation of a call that raised, ``search`` the cause search over both).

A check raises :class:`Fail` with an observation (what differs: the shape got against the one
expected, where the numbers first depart and by how much, what the error said) or returns when the
answer is right. A mistake is named only by :func:`search.search`: a catalogued switch (or pair) of
:mod:`mha_checks.variants` / :mod:`mha_checks.attention` whose reference reproduces the answer (its
values within the grade's tolerance, its shape, or its failure) on every call of the test.
"""
from . import assembly, decoding, fuse, linear, merge, per_head, split
from .common import Fail, Spec
from .errors import error_fail
from .search import Call, named, search

SPECS = {
    "project": linear.spec("project", "w", "b", "d_in, d_out", "B, T, d_in", "B, T, d_out", "the product"),
    "fuse_heads": fuse.SPEC,
    "split_heads": split.SPEC,
    "merge_heads": merge.SPEC,
    "output_projection": linear.spec("output_projection", "w_o", "b_o", "h*d_v, d_model", "B, T, h*d_v",
                                     "B, T, d_model", "W^O"),
    "output_projection_per_head": per_head.SPEC,
    "multi_head_attention": assembly.SPEC,
    **decoding.SPECS,
}

__all__ = ["SPECS", "Fail", "Spec", "Call", "named", "search", "error_fail"]
