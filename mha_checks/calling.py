"""Calling a student's function on one case, and carrying values as plain data.

This module is the only piece of the checks that runs next to student code: in the student's own
kernel (visible tests) and inside the grader's sandbox (hidden tests), where it is copied alone.
It therefore imports nothing from the course, only NumPy (and torch when a case needs it), and
what it returns is plain data: arrays, numbers, strings, lists and dicts, never objects that
could run code on the side that reads them.

A value on the wire (``encode``/``decode``) is JSON with tagged objects:
``{"$array": {"dtype", "shape", "data" (base64 of the little-endian bytes)[, "order"]}}`` (with
``order``, a permutation P, the data are those of ``a.transpose(P)`` and the array is rebuilt as a
transposed view: an argument that is a view reaches the student's function as one),
``{"$tensor": <array>}`` (a torch tensor), ``{"$tuple": [...]}``, ``{"$mha": {...}}`` (the
weights of a ``torch.nn.MultiheadAttention``, built on the student's side), ``{"$other": type}``.
"""
import base64
import sys
import traceback

import numpy as np

MAX_ELEMENTS = 1_000_000  # a result larger than this is not carried back
DTYPES = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"}
READY_MADE = "calling the mha module itself (torch.nn.MultiheadAttention's forward)"


class ReadyMade(Exception):
    """Raised by the stand-in module's forward: the student's code called torch's own answer."""


def encode_array(a: np.ndarray, keep_layout: bool = False) -> dict:
    """``a`` as plain data; with ``keep_layout`` a transposed view is carried as one (see the module)."""
    order = transposition(a) if keep_layout else None
    a = np.ascontiguousarray(a if order is None else a.transpose(order))
    if a.dtype.name not in DTYPES:
        a = a.astype(np.float64)
    data = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
    spec = {"dtype": a.dtype.name, "shape": list(a.shape), "data": base64.b64encode(data).decode()}
    if order is not None:
        spec["order"] = order
        spec["shape"] = [spec["shape"][i] for i in np.argsort(order)]  # the shape of the view itself
    return {"$array": spec}


def transposition(a: np.ndarray) -> list[int] | None:
    """P such that ``a.transpose(P)`` is C-contiguous while ``a`` is not (None: no such P)."""
    a = np.asarray(a)
    if a.flags.c_contiguous or a.ndim < 2:
        return None
    order = sorted(range(a.ndim), key=lambda i: -a.strides[i])
    return order if a.transpose(order).flags.c_contiguous else None


def decode_array(spec: dict) -> np.ndarray:
    """The array of ``{"$array": ...}`` (a fresh, writable copy; a transposed view when ``order`` is
    given); raises ValueError on anything malformed."""
    dtype, shape = spec["dtype"], [int(n) for n in spec["shape"]]
    if dtype not in DTYPES or any(n < 0 for n in shape) or int(np.prod(shape)) > MAX_ELEMENTS:
        raise ValueError(f"unacceptable array: dtype {dtype!r}, shape {shape}")
    order = spec.get("order")
    if order is not None and sorted(int(i) for i in order) != list(range(len(shape))):
        raise ValueError(f"unacceptable array order {order!r} for shape {shape}")
    order = list(range(len(shape))) if order is None else [int(i) for i in order]
    raw = base64.b64decode(spec["data"], validate=True)
    stored = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).reshape([shape[i] for i in order])
    return stored.astype(dtype).transpose(np.argsort(order))


def encode(value, depth: int = 0):
    """A returned value as plain data (tensors detached, sequences kept as lists or tuples)."""
    if depth > 4:
        return {"$other": "a value nested too deep"}
    if value is None or isinstance(value, bool | int | float | str):
        return value[:200] if isinstance(value, str) else value
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        try:
            array = _bfloat16_as_float16(value) if str(getattr(value, "dtype", "")) == "torch.bfloat16" \
                else value.detach().cpu().numpy()
        except (TypeError, RuntimeError):  # complex32, sparse, ...: not an answer we can read
            return {"$other": f"a tensor of dtype {str(getattr(value, 'dtype', '?'))[:40]}"}
        return {"$tensor": _encode_numeric(array, type_name(value))}
    if isinstance(value, np.ndarray) and value.dtype == object and value.ndim == 1 and len(value) <= 64:
        value = list(value)  # np.array([w, b], dtype=object): a sequence of its items, like a list
    if isinstance(value, np.ndarray | np.generic):
        return _encode_numeric(np.asarray(value), type_name(value))
    if isinstance(value, tuple | list) and len(value) <= 64:
        items = [encode(v, depth + 1) for v in value]
        return {"$tuple": items} if isinstance(value, tuple) else items
    return {"$other": f"a {type_name(value)}"}


def _encode_numeric(a: np.ndarray, name: str):
    if a.size > MAX_ELEMENTS:
        return {"$other": f"an array of {a.size} elements (more than {MAX_ELEMENTS})"}
    if a.dtype.kind == "f" and a.dtype.itemsize > 8:  # longdouble (float128): more precise than float64
        a = a.astype(np.float64)
    if a.dtype.name not in DTYPES:
        return {"$other": f"{'a NumPy array' if name == 'ndarray' else 'a ' + name} of dtype {str(a.dtype)[:40]}"}
    return encode_array(a)


def _bfloat16_as_float16(tensor) -> np.ndarray:
    """A bfloat16 tensor (NumPy has no bfloat16) as float16, which holds its values exactly in
    float16's range (|v| < 65504, down to 6e-5): graded as the 16-bit float it is. Beyond that
    range, float32."""
    a = tensor.detach().cpu().float().numpy()
    finite = np.abs(a[np.isfinite(a)])
    return a.astype(np.float16) if finite.max(initial=0.0) < 65504 else a


def decode(value):
    """The inverse of :func:`encode` for the trusted side: arrays stay NumPy (a tensor is marked)."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "$array" in value:
        return decode_array(value["$array"])
    if "$tensor" in value:
        return Tensor(decode(value["$tensor"]))
    if "$tuple" in value:
        return tuple(decode(v) for v in value["$tuple"])
    if "$other" in value:
        return Other(str(value["$other"]))
    raise ValueError(f"unknown value {sorted(value)[:3]}")


class Tensor(np.ndarray):
    """A decoded torch tensor: a NumPy array that remembers it came from torch."""

    def __new__(cls, a):
        return np.asarray(a).view(cls)


class Other(str):
    """A decoded value that was neither an array nor a number (its type's name)."""


# --------------------------------------------------------------------------------------------
# Building the arguments of a case on the student's side
# --------------------------------------------------------------------------------------------

def fresh_array(spec: dict) -> np.ndarray:
    """The array of an ``$array`` spec, a copy of its own in the spec's layout (the default)."""
    return decode_array(spec)


def build_argument(spec, make_array=fresh_array):
    """A case's argument as the student's function receives it (fresh arrays every call).

    ``make_array``: turns an ``$array`` spec into the array passed (the grader's harness passes
    views of memory that it shares with the process calling the function, and watches)."""
    if isinstance(spec, list):
        return [build_argument(s, make_array) for s in spec]
    if isinstance(spec, dict):
        if "$array" in spec:
            return make_array(spec["$array"])  # fresh every call, in the case's own layout
        if "$tensor" in spec:
            import torch
            return torch.from_numpy(build_argument(spec["$tensor"], make_array))
        if "$mha" in spec:
            return guarded_mha(spec["$mha"], make_array)
        raise ValueError(f"unknown argument {sorted(spec)[:3]}")
    return spec


def guarded_mha(spec: dict, make_array=fresh_array):
    """A real torch.nn.MultiheadAttention (batch_first) with the case's weights, whose own
    forward raises :class:`ReadyMade`: the student must compute attention from its weights.
    Its parameters share memory with the arrays ``make_array`` gives (a change to them is seen there)."""
    import torch

    class MultiheadAttention(torch.nn.MultiheadAttention):
        def forward(self, *args, **kwargs):
            raise ReadyMade(READY_MADE)

    weights = {k: torch.from_numpy(make_array(v["$array"])) for k, v in spec["weights"].items()}
    dtype = weights["in_proj_weight"].dtype
    mha = MultiheadAttention(spec["embed_dim"], spec["num_heads"], batch_first=True, dtype=dtype)
    mha.in_proj_weight = torch.nn.Parameter(weights["in_proj_weight"])
    mha.in_proj_bias = torch.nn.Parameter(weights["in_proj_bias"])
    mha.out_proj.weight = torch.nn.Parameter(weights["out_proj_weight"])
    mha.out_proj.bias = torch.nn.Parameter(weights["out_proj_bias"])
    return mha.eval()


def _snapshot(value):
    """What an argument holds now, to detect a change made in place."""
    if hasattr(value, "state_dict"):
        return {k: v.detach().clone() for k, v in value.state_dict().items()}
    if isinstance(value, list):
        return [_snapshot(v) for v in value]
    if hasattr(value, "detach"):
        return value.detach().clone()
    if isinstance(value, np.ndarray):
        return value.copy()
    return None


def _same(before, after) -> bool:
    if isinstance(before, dict):
        return all(_same(v, after.state_dict()[k]) for k, v in before.items())
    if isinstance(before, list):
        return len(before) == len(after) and all(_same(b, a) for b, a in zip(before, after))
    if before is None:
        return True
    a, b = np.asarray(before.detach() if hasattr(before, "detach") else before), \
        np.asarray(after.detach() if hasattr(after, "detach") else after)
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def call(fn, names: list[str], specs: list, make_array=fresh_array) -> dict:
    """Call ``fn`` on the arguments described by ``specs`` (named ``names``); the outcome as plain data.

    ``{"result": <encoded>}`` or ``{"error": {"type", "message", "line"}}``, plus ``"mutated"``:
    the names of the arguments the call changed in place, and ``"ready_made"`` when the call
    reached torch's own forward of the module it was given.
    """
    args = [build_argument(s, make_array) for s in specs]
    before = [_snapshot(a) for a in args]
    outcome: dict = {"mutated": []}
    try:
        outcome["result"] = encode(fn(*args))
    except ReadyMade:
        outcome["ready_made"] = READY_MADE
    except BaseException as err:  # noqa: BLE001 - the student's error (even SystemExit) is data too
        outcome["error"] = describe_error(err)
    outcome["mutated"] = [n for n, b, a in zip(names, before, args) if not _same(b, a)]
    return outcome


def describe_error(err: BaseException) -> dict:
    """Type, message and the line of the student's code (a notebook cell) where it was raised."""
    line = None
    for frame, lineno in traceback.walk_tb(err.__traceback__):
        if frame.f_code.co_filename.startswith(("<cell", "<ipython-input")) or "ipykernel_" in frame.f_code.co_filename:
            line = lineno
    if isinstance(err, SyntaxError):
        line = err.lineno
    return {"type": type_name(err), "message": str(err)[:500], "line": line}


def type_name(value) -> str:
    """The name of ``value``'s type, cut to 60 characters (a student's class may be named anything)."""
    name = str(type(value).__name__)
    return name if len(name) <= 60 else name[:57] + "..."


if __name__ == "__main__":  # pragma: no cover - a quick look: python -m mha_checks.calling
    print(call(lambda x: x * 2, ["x"], [encode_array(np.arange(3.0))]), file=sys.stderr)
