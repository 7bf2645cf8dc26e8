"""Permutation analysis: which reshape/transpose turned the input's elements into this result?

A split or a merge only moves elements. When every element of the input is different, each
element of the result tells where it came from; the arrangement is then explained as
``x.reshape(S).transpose(P)`` (then reshaped to the result's shape), where ``S`` orders the
named sizes of the problem (B, T, h, d_k, ...) and ``P`` permutes the axes. All orders and
permutations of four axes are tried (24 x 24): the simplest one that reproduces the result is
reported, in the student's own terms, next to the one that was asked for.
"""
from dataclasses import dataclass
from itertools import permutations

import numpy as np


@dataclass(frozen=True)
class Arrangement:
    order: tuple     # names of the reshape's axes, e.g. ("B", "T", "h", "d_k")
    perm: tuple      # the transpose applied after it
    natural: bool = False  # the order is the input's own shape: no reshape needed before the transpose

    @property
    def plain(self) -> bool:
        """The elements are in their original order: a reshape alone (or nothing) made this."""
        return self.perm == tuple(range(len(self.perm)))

    def code(self, var: str = "x") -> str:
        text = var if self.natural else f"{var}.reshape({', '.join(self.order)})"
        if self.perm != tuple(range(len(self.perm))):
            text += f".transpose{self.perm}"
        return text


def sources(got: np.ndarray, source: np.ndarray, rtol: float) -> np.ndarray | None:
    """For every element of ``got`` the flat index of the element of ``source`` it equals, or None
    when the source's elements are not all different or some element of ``got`` is none of them."""
    flat = np.asarray(source, dtype=np.float64).ravel()
    got = np.asarray(got, dtype=np.float64).ravel()
    if flat.size < 2 or got.size != flat.size or not np.isfinite(got).all():
        return None
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    if np.min(np.diff(ordered)) <= 0:
        return None
    exact = np.isin(got, ordered)
    scale = max(1.0, float(np.abs(flat).max()))
    slack = 0.0 if exact.all() else rtol * scale  # copies are exact; a cast to float32 is not
    if slack and np.min(np.diff(ordered)) <= 2 * slack:
        return None
    pos = np.clip(np.searchsorted(ordered, got), 1, len(ordered) - 1)
    left, right = ordered[pos - 1], ordered[pos]
    pick = np.where(np.abs(got - left) <= np.abs(got - right), pos - 1, pos)
    if np.abs(ordered[pick] - got).max() > slack:
        return None
    return order[pick]


def explain(labels: np.ndarray, names: dict, shape: tuple = ()) -> Arrangement | None:
    """The simplest ``reshape(S).transpose(P)`` of ``arange(N)`` equal to ``labels`` (flattened)."""
    labels = np.asarray(labels).ravel()
    found = []
    seen_orders = set()
    for order in permutations(names):
        sizes = tuple(names[n] for n in order)
        if sizes in seen_orders and len(set(names.values())) < len(names):
            continue
        seen_orders.add(sizes)
        base = np.arange(labels.size).reshape(sizes)
        for perm in permutations(range(len(order))):
            if np.array_equal(base.transpose(perm).ravel(), labels):
                found.append(Arrangement(order, perm))
    if not found:
        return None
    natural = list(names)
    best = min(found, key=lambda a: _complexity(a, natural))
    own = list(best.order) == natural and tuple(names[n] for n in natural) == tuple(shape)
    return Arrangement(best.order, best.perm, natural=own)


def _complexity(a: Arrangement, natural: list) -> tuple:
    """Fewest axes moved by the transpose plus fewest names out of their natural order."""
    moved = sum(i != p for i, p in enumerate(a.perm))
    rank = [natural.index(n) for n in a.order]
    inversions = sum(1 for i in range(len(rank)) for j in range(i + 1, len(rank)) if rank[i] > rank[j])
    return moved + inversions, a.perm, rank


def analyse(got: np.ndarray, source: np.ndarray, names: dict, rtol: float) -> Arrangement | None:
    """The arrangement of ``source``'s elements that ``got`` holds, if it is one."""
    labels = sources(got, source, rtol)
    return None if labels is None else explain(labels, names, np.shape(source))
