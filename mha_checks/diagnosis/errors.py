"""A student's function that raised: the error, its line, and the facts of the call, observed.

No mistake is named here. A mistake is named only by the cause search (:func:`search.search`),
when a catalogued switch fails *the same way* on this call (and on every other call of the test):
the same :func:`signature`, read from the student's message and from the switch's own failure,
in NumPy's words or torch's. A signature keeps everything the words say that both libraries say: the
sizes and their order (which operand had which size), the axis, the operator and the side a None stood
on, an assertion's own message. An error is never reproduced by its type alone: a switch that cannot
say what its failure's words would be names nothing.
"""
import re

from ..cases import causal_of
from ..variants import Failure
from .common import Fail


def _ints(text: str) -> tuple:
    return tuple(-1 if t in ("-1", "newaxis") else int(t) for t in re.findall(r"-?\d+|newaxis", text))


def _broadcast(a: int, b: int, dim: int) -> tuple:
    """The sizes of the two operands (in their order: torch's "tensor a" is the first) at the axis they clash."""
    return ("broadcast", a, b, dim)


def _numpy_broadcast(shapes_text: str) -> tuple | None:
    """The last dimension where NumPy's shapes disagree, as torch reports it (the first operand's size there,
    the next one's that differs, its index)."""
    shapes = [_ints(s) for s in re.findall(r"\(([\d,]*)\)", shapes_text)]
    shapes = [s for s in shapes if s]
    if len(shapes) < 2:
        return None
    n = max(map(len, shapes))
    padded = [(1,) * (n - len(s)) + s for s in shapes]
    for dim in range(n - 1, -1, -1):
        sizes = list(dict.fromkeys(s[dim] for s in padded if s[dim] != 1))
        if len(sizes) > 1:
            return _broadcast(sizes[0], sizes[1], dim)
    return None


def _none_operand(m) -> tuple:
    """``None`` in arithmetic: the operator, and on which side None stood."""
    return ("None in arithmetic", m[1].strip(), "left" if m[2] == "NoneType" else "right")


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
    (r"unsupported operand type\(s\) for ([^:]+): '(\w+)' and '(\w+)'",
     lambda m: _none_operand(m) if "NoneType" in (m[2], m[3]) else None),
    (r"not enough values to unpack \(expected (\d+), got (\d+)\)", lambda m: ("rank", int(m[1]), int(m[2]))),
    (r"number of subscripts in the equation \((\d+)\) does not match the number of dimensions \((\d+)\)",
     lambda m: ("rank", int(m[1]), int(m[2]))),
    (r"too many indices for array: array is (\d+)-dimensional, but (\d+) were indexed",
     lambda m: ("rank", int(m[2]), int(m[1]))),
    (r"einstein sum subscripts string contains too many subscripts for operand (\d+)",
     lambda m: ("rank", "einsum", int(m[1]))),  # (NumPy names no count: code for more axes than operand m[1] has)
]


def signature(kind: str, message: str) -> tuple:
    """What failed, in terms both NumPy's and torch's messages give (the sizes a reshape, a matrix
    product or a broadcast met, in their order); otherwise the error's type and message themselves (an
    assertion: its own message, which only an assertion without one reproduces)."""
    if kind == "AssertionError":
        return ("assert", message.strip())
    for pattern, make in PATTERNS:
        found = re.search(pattern, message)
        if found:
            sig = make(found)
            if sig is not None:
                return sig
    return ("other", kind, message[:300])


def same_failure(error: dict, err: BaseException) -> bool:
    """Does the switch's failure ``err`` reproduce the student's ``error``, its words included (the same
    signature: a type alone never does)?"""
    theirs = signature(str(error.get("type", "")), str(error.get("message", "")))
    forms = err.forms if isinstance(err, Failure) else (signature(type(err).__name__, str(err)),)
    return any(_same(mine, theirs) for mine in forms)


def _same(mine: tuple, theirs: tuple) -> bool:
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


__all__ = ["Failure", "signature", "same_failure", "error_fail", "facts", "ran"]
