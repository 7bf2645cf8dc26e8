"""A student's function that raised: the error, its line, and the facts of the call, observed.

No mistake is named here. A mistake is named only by the cause search (:func:`search.search`),
when a catalogued switch fails *the same way* on this call (and on every other call of the test):
the same :func:`signature`, read from the student's message and from the switch's own failure,
in NumPy's words or torch's.
"""
import re

from ..cases import causal_of
from ..variants import ANY, Failure
from .common import Fail


def _ints(text: str) -> tuple:
    return tuple(-1 if t in ("-1", "newaxis") else int(t) for t in re.findall(r"-?\d+|newaxis", text))


def _broadcast(a: int, b: int, dim: int) -> tuple:
    return ("broadcast", frozenset((a, b)), dim)


def _numpy_broadcast(shapes_text: str) -> tuple | None:
    """The last dimension where NumPy's shapes disagree, as torch reports it (a, b, its index)."""
    shapes = [_ints(s) for s in re.findall(r"\(([\d,]*)\)", shapes_text)]
    shapes = [s for s in shapes if s]
    if len(shapes) < 2:
        return None
    n = max(map(len, shapes))
    padded = [(1,) * (n - len(s)) + s for s in shapes]
    for dim in range(n - 1, -1, -1):
        sizes = {s[dim] for s in padded} - {1}
        if len(sizes) > 1:
            a, b = sorted(sizes)[:2]
            return _broadcast(a, b, dim)
    return None


PATTERNS = [  # (regex, signature from the match)
    (r"shape '\[([-\d, ]*)\]' is invalid for input of size (\d+)", lambda m: ("reshape", int(m[2]), _ints(m[1]))),
    (r"cannot reshape array of size (\d+) into shape \(([^)]*)\)", lambda m: ("reshape", int(m[1]), _ints(m[2]))),
    (r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)",
     lambda m: ("contract", int(m[2]), int(m[3]))),
    (r"Expected size for first two dimensions of batch2 tensor to be: \[\d+, (\d+)\] but got: \[\d+, (\d+)\]",
     lambda m: ("contract", int(m[1]), int(m[2]))),
    (r"mismatch in its core dimension 0.*\(size (\d+) is different from (\d+)\)",
     lambda m: ("contract", int(m[2]), int(m[1]))),
    (r"shapes \([\d, ]*\) and \([\d, ]*\) not aligned: (\d+) \(dim \d+\) != (\d+) \(dim \d+\)",
     lambda m: ("contract", int(m[1]), int(m[2]))),
    (r"The size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton dimension (\d+)",
     lambda m: _broadcast(int(m[1]), int(m[2]), int(m[3]))),
    (r"operands could not be broadcast together with shapes ((?:\([\d,]*\) ?)+)", lambda m: _numpy_broadcast(m[1])),
    (r"Sizes of tensors must match except in dimension (\d+)\. Expected size (\d+) but got size (\d+)",
     lambda m: ("join", int(m[1]), frozenset((int(m[2]), int(m[3]))))),  # torch.cat along m[1]
    (r"view size is not compatible with input tensor's size and stride", lambda m: ("view of a transposed tensor",)),
    (r"non-empty list of Tensors|non-empty TensorList|need at least one array to", lambda m: ("nothing to join",)),
    (r"'NoneType'", lambda m: ("None in arithmetic",)),
]


def signature(kind: str, message: str) -> tuple:
    """What failed, in terms both NumPy's and torch's messages give (the sizes a reshape, a matrix
    product or a broadcast met); otherwise the error's type and message themselves."""
    if kind == "AssertionError":
        return ("assert",)
    for pattern, make in PATTERNS:
        found = re.search(pattern, message)
        if found:
            sig = make(found)
            if sig is not None:
                return sig
    return ("other", kind, message[:300])


def same_failure(error: dict, err: BaseException) -> bool:
    """Does the switch's failure ``err`` reproduce the student's ``error`` (its type and message)?"""
    mine = err.signature if isinstance(err, Failure) else signature(type(err).__name__, str(err))
    if mine == ANY:
        return True
    theirs = signature(str(error.get("type", "")), str(error.get("message", "")))
    if mine[0] == "reshape" and theirs[0] == "reshape":  # a -1 of the student's may stand for any size
        return mine[1] == theirs[1] and len(mine[2]) == len(theirs[2]) and \
            all(t in (-1, m) for m, t in zip(mine[2], theirs[2]))
    return mine == theirs


def error_fail(call: str, case, error: dict, sizes: dict) -> None:
    """The observation of a call that raised (raises :class:`Fail`): the error, its line, the call's facts."""
    kind, message = str(error.get("type", "Exception")), str(error.get("message", ""))[:300]
    line = error.get("line")
    at = f" (line {line} of your cell)" if isinstance(line, int) else ""
    head = f"{call} raised {kind}{at}: {message.rstrip('.')}. {facts(case, sizes)}".rstrip()
    if kind == "NotImplementedError":
        raise Fail(f"{call} raised NotImplementedError: it is not written yet (replace "
                   "`raise NotImplementedError()` with your code).", "not written yet")
    keyword = re.search(r"unexpected keyword argument '(\w+)'", message)
    if keyword:  # the error's own words name what is wrong
        raise Fail(f"{head} The function you call has no argument named {keyword.group(1)}= (NumPy's transpose "
                   "takes axes=, torch's transpose two dims, TensorFlow's takes perm=): check its signature.",
                   f"wrong keyword argument {keyword.group(1)}=", head=head, searchable=True)
    raise Fail(head, f"raises {kind}", head=head, searchable=True)


def facts(case, sizes: dict) -> str:
    """This call's sizes (and, for cross-attention, what they make), for the student to read the error's
    numbers against: a number of the message is never labelled by its value alone."""
    if not sizes:
        return ""
    if case.function == "multi_head_attention" and sizes["T_q"] != sizes["T_k"]:
        causal = causal_of(case)
        return (f"This call is {'causal ' if causal else ''}cross-attention: T_q = {sizes['T_q']} queries, T_k = "
                f"{sizes['T_k']} keys, so the scores are (B, h, T_q, T_k) = ({sizes['B']}, {sizes['h']}, "
                f"{sizes['T_q']}, {sizes['T_k']})" + (f" and the mask (T_q, T_k) = ({sizes['T_q']}, {sizes['T_k']}), "
                                                      "query i seeing keys 0..i" if causal else "") + ".")
    return "This call's sizes: " + ", ".join(f"{k} = {v}" for k, v in sizes.items()) + "."


def ran(outcome) -> bool:
    """The call returned or raised (it was not cut short, and the function existed)."""
    return isinstance(outcome, dict) and ("result" in outcome or isinstance(outcome.get("error"), dict))


__all__ = ["Failure", "ANY", "signature", "same_failure", "error_fail", "facts", "ran"]
