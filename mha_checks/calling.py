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
weights of a ``torch.nn.MultiheadAttention``, handed to the student as :class:`MhaStandIn`), ``{"$attn": {...}}``
and ``{"$decoder": {...}}`` (exercise 6: the weights of one layer's attention and of a whole decoder of
``mha_lib.decoder``, handed over as :class:`AttentionStandIn` and :class:`DecoderStandIn`),
``{"$other": type}``.

Nothing here decides a grade or guards anything: what a call returns is judged outside, whether
it changed its arguments is seen by its caller (the arguments are memory the caller compares, or
cannot be changed: see "The arguments of a case" below), and whether the code may run at all is
decided before, from its source (:mod:`mha_checks.admission`).
"""
import base64
import functools
import itertools
import math
import sys
import traceback

import numpy as np

MAX_ELEMENTS = 1_000_000  # a result larger than this is not carried back
MAX_VALUES = 20_000       # numbers, strings, arrays and lists in one result (the largest answer has ~1,200)
MAX_ITEMS = 64            # items of one returned list or tuple (an answer is at most a pair, or h arrays)
DTYPES = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"}
NOT_A_MODULE = ("mha holds the weights of a torch.nn.MultiheadAttention, nothing more: calling the module (its "
                "forward) would be a ready-made answer, so here it computes nothing. Compute the attention "
                "yourself from mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight and mha.out_proj.bias")


def encode_array(a: np.ndarray, keep_layout: bool = False) -> dict:
    """``a`` as plain data; with ``keep_layout`` a transposed view is carried as one (see the module)."""
    order = transposition(a) if keep_layout else None
    a = np.ascontiguousarray(a if order is None else a.transpose(order))
    if dtype_name(a.dtype) not in DTYPES:
        a = a.astype(np.float64)
    data = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
    spec = {"dtype": dtype_name(a.dtype), "shape": list(a.shape), "data": base64.b64encode(data).decode()}
    if order is not None:
        spec["order"] = order
        spec["shape"] = [spec["shape"][i] for i in np.argsort(order)]  # the shape of the view itself
    return {"$array": spec}


@functools.lru_cache(maxsize=64)
def dtype_name(dtype: np.dtype) -> str:
    """``dtype.name``, worked out once per dtype (NumPy derives it anew at each read)."""
    return dtype.name


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
    if dtype not in DTYPES or any(n < 0 for n in shape) or math.prod(shape) > MAX_ELEMENTS:
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
    if isinstance(value, ArgumentArray | ArgumentList):  # an argument given back: what it holds
        value = value.view(np.ndarray) if isinstance(value, ArgumentArray) else list(value)
    elif argument_tensor_class.cache_info().currsize and isinstance(value, argument_tensor_class()):
        import torch
        value = value.as_subclass(torch.Tensor)
    if depth > 4:
        return {"$other": "a value nested too deep"}
    if value is None or isinstance(value, bool):
        return value if value is None else bool.__bool__(value)
    if isinstance(value, int):  # (its own value, not what a subclass says of itself)
        number = int.__int__(value)
        return number if -(1 << 63) < number < 1 << 63 else {"$other": "an integer beyond 64 bits"}
    if isinstance(value, float | str):
        return float.__float__(value) if isinstance(value, float) else str.__getitem__(value, slice(None, 200))
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        try:
            array = _bfloat16_as_float16(value) if str(getattr(value, "dtype", "")) == "torch.bfloat16" \
                else value.detach().cpu().numpy()
        except (TypeError, RuntimeError):  # complex32, sparse, ...: not an answer we can read
            return {"$other": f"a tensor of dtype {str(getattr(value, 'dtype', '?'))[:40]}"}
        return {"$tensor": _encode_numeric(array, type_name(value))}
    if isinstance(value, np.ndarray) and value.dtype == object and value.ndim == 1 and len(value) <= MAX_ITEMS:
        value = list(value)  # np.array([w, b], dtype=object): a sequence of its items, like a list
    if isinstance(value, np.ndarray | np.generic):
        return _encode_numeric(np.asarray(value), type_name(value))
    if isinstance(value, tuple | list):  # its items, as many as it holds (never its len(), which may say otherwise)
        items = list(itertools.islice(tuple.__iter__(value) if isinstance(value, tuple) else list.__iter__(value),
                                      MAX_ITEMS + 1))
        if len(items) > MAX_ITEMS:
            return {"$other": f"a {type_name(value)} of more than {MAX_ITEMS} items"}
        items = [encode(v, depth + 1) for v in items]
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


def at_most(value, cap: int = MAX_VALUES) -> bool:
    """Whether plain data ``value`` holds at most ``cap`` values (counted without recursion, looking at no
    more than cap + 1 of them: linear in the cap, whatever ``value`` holds)."""
    todo, count = [value], 0
    while todo:
        item = todo.pop()
        count += 1
        if count > cap:
            return False
        if isinstance(item, list | dict):
            todo += itertools.islice(item.values() if isinstance(item, dict) else item, cap + 1)
    return True


TOO_MANY_VALUES = {"$other": f"a value of more than {MAX_VALUES} numbers, arrays and lists"}


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
# The arguments of a case, as the student's function receives them
# --------------------------------------------------------------------------------------------
#
# Everything a function receives is either memory the caller compares after the call (the elements of
# every array and tensor, laid out by a Layout: the grader's harness lays them out in memory it shares
# with the process that calls the function, and compares them in its own process), or a value that
# cannot be changed in place: numbers, strings, None; a list argument (ArgumentList), mha and its
# out_proj (their attributes cannot be set), an array's or a tensor's shape, strides and dtype
# (ArgumentArray, ArgumentTensor). An attempt to change one raises ArgumentChanged, which the judge names
# as a change in place. So whether a call changed its arguments is never the calling process's word.

ALIGN = 64  # each array's place in a layout starts at a multiple of this


class ArgumentChanged(TypeError):
    """The function tried to change in place an argument that is handed over unchangeable (a list, mha, an
    array's shape): the caller's argument would have changed. The message starts with the argument's name."""


def _changed(name: str, what: str):
    raise ArgumentChanged(f"`{name}` is the caller's, and {what} would change it in place: a function must leave "
                          f"its arguments as it found them (work on a copy, or compute new values)")


class Layout:
    """A case's arrays laid out in one buffer, with a copy of what was put there: the call changed an argument
    in place when the bytes at its place differ afterwards (:meth:`changed`)."""

    def __init__(self, memory):
        self.memory = memory  # a writable buffer: an mmap shared with the calling process, or a bytearray
        self.placed: list[tuple[str, int, bytes]] = []  # (argument name, offset, the bytes put there)
        self.end = 0

    @staticmethod
    def size(spec) -> int:
        """The bytes the arrays of ``spec`` (a case's specs, or one of them) take in a layout."""
        if isinstance(spec, list):
            return sum(Layout.size(s) for s in spec)
        if not isinstance(spec, dict):
            return 0
        if "$array" in spec:
            a = spec["$array"]
            return -(-math.prod(int(n) for n in a["shape"]) * np.dtype(a["dtype"]).itemsize // ALIGN) * ALIGN
        return sum(Layout.size(v) for v in spec.values())

    def lay_out(self, names: list[str], specs: list) -> list:
        """``specs`` with every array's data replaced by its place in the memory."""
        self.placed, self.end = [], 0
        return [self._place(name, spec) for name, spec in zip(names, specs)]

    def _place(self, name: str, spec):
        if isinstance(spec, list):
            return [self._place(name, s) for s in spec]
        if not isinstance(spec, dict):
            return spec
        if "$array" in spec:
            order = spec["$array"].get("order")  # a view: its memory laid out in the stored order
            array = decode_array(spec["$array"])
            stored = array if order is None else array.transpose([int(i) for i in order])
            data = np.ascontiguousarray(stored).tobytes()
            if self.end + len(data) > len(self.memory):
                raise ValueError(f"a case's arrays exceed the memory laid out for them ({len(self.memory)} bytes)")
            self.memory[self.end:self.end + len(data)] = data
            self.placed.append((name, self.end, data))
            placed = {"dtype": array.dtype.name, "shape": list(stored.shape), "offset": self.end, "order": order}
            self.end += -(-len(data) // ALIGN) * ALIGN
            return {"$array": placed}
        return {k: self._place(name, v) for k, v in spec.items()}  # $tensor, $mha and its weights

    def view(self, spec: dict) -> np.ndarray:
        """The array laid out at ``spec``'s place (in the calling process: the memory it shares)."""
        dtype = np.dtype(spec["dtype"])
        count = int(np.prod(spec["shape"]))
        stored = np.frombuffer(self.memory, dtype, count, spec["offset"]).reshape(spec["shape"])
        return stored if spec.get("order") is None else stored.transpose(np.argsort(spec["order"]))

    def changed(self) -> set[str]:
        """The arguments whose memory no longer holds what was put there."""
        return {name for name, offset, data in self.placed if self.memory[offset:offset + len(data)] != data}


def _refusing(attribute: str) -> property:
    """ndarray's ``attribute`` (shape, strides, dtype), which cannot be set on the argument itself."""
    base = getattr(np.ndarray, attribute)

    def set_(self, value):
        if self._argument is not None:
            _changed(self._argument, f"setting its .{attribute}")
        base.__set__(self, value)
    return property(base.__get__, set_)


class ArgumentArray(np.ndarray):
    """An array argument: an ndarray whose own shape, strides and dtype cannot be set (its elements are the
    caller's memory: writing them is seen there). Views of it and results computed from it are ordinary."""
    _argument = None  # the argument's name, on the argument itself only
    shape, strides, dtype = _refusing("shape"), _refusing("strides"), _refusing("dtype")

    def resize(self, *args, **kwargs):
        if self._argument is not None:
            _changed(self._argument, ".resize")
        return super().resize(*args, **kwargs)

    def setflags(self, *args, **kwargs):
        if self._argument is not None:
            _changed(self._argument, ".setflags")
        return super().setflags(*args, **kwargs)

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        """Computed as on plain arrays (a sum is a number, not an array of this class); ``out=`` writes the
        caller's memory, and gives back what was passed."""
        plain = [i.view(np.ndarray) if isinstance(i, ArgumentArray) else i for i in inputs]
        if out is not None:
            kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, ArgumentArray) else o for o in out)
        result = getattr(ufunc, method)(*plain, **kwargs)
        return (out[0] if len(out) == 1 else out) if out is not None else result

    def __repr__(self):
        return repr(self.view(np.ndarray))


def argument_array(array: np.ndarray, name: str) -> ArgumentArray:
    argument = array.view(ArgumentArray)
    argument._argument = name
    return argument


TENSOR_CHANGES = ("as_strided_", "detach_", "requires_grad_", "resize_", "resize_as_", "resize_as_sparse_", "set_",
                  "share_memory_", "sparse_resize_", "sparse_resize_and_clear_", "squeeze_", "swapaxes_", "swapdims_",
                  "t_", "transpose_", "unsqueeze_", "rename_", "__setstate__")  # a tensor's in-place changes but its elements'
TENSOR_SETTERS = ("data", "grad", "requires_grad", "names")


@functools.cache
def argument_tensor_class():
    """ArgumentTensor (made on first use: this module imports torch only when a case needs it)."""
    import torch

    def refused(what: str):
        def change(self, *args, **kwargs):
            _changed(self._argument, f".{what}()")
        return change

    class ArgumentTensor(torch.Tensor):
        """A tensor argument whose shape, strides, storage and attributes cannot be changed in place (its
        elements are the caller's memory: writing them is seen there). Whatever is computed from it, views
        included, is an ordinary tensor."""
        _argument = "argument"
        locals().update({what: refused(what) for what in TENSOR_CHANGES})

        def __setattr__(self, attribute, value):
            if attribute in TENSOR_SETTERS:
                _changed(self._argument, f"setting its .{attribute}")
            super().__setattr__(attribute, value)

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            what = getattr(func, "__name__", "")  # (the in-place changes called as torch.Tensor.<name>(x, ...))
            if (what in TENSOR_CHANGES or what == "__set__") and args and isinstance(args[0], ArgumentTensor):
                setter = getattr(getattr(func, "__self__", None), "__name__", "")
                _changed(args[0]._argument, f"setting its .{setter}" if what == "__set__" else f".{what}()")
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **(kwargs or {}))

        def __repr__(self, **kwargs):
            return repr(self.as_subclass(torch.Tensor))

    ArgumentTensor.__qualname__ = ArgumentTensor.__name__
    return ArgumentTensor


def argument_tensor(tensor, name: str):
    argument = tensor.as_subclass(argument_tensor_class())
    argument._argument = name
    return argument


class ArgumentList(tuple):
    """A list argument (``w_heads``) as the function receives it: read like the caller's list (indexing,
    slices, len, iteration, ``+``, ``copy()``, ``index``, ``count``), never changed in place (append, ``[i] =``,
    ``+=``, sort, ... raise ArgumentChanged)."""

    def __new__(cls, items, name: str = "argument"):
        self = super().__new__(cls, items)
        object.__setattr__(self, "_argument", name)
        return self

    def _refuse(self, *args, **kwargs):
        _changed(self._argument, "changing the list")

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    __hash__ = None  # (a list has none)

    def __setattr__(self, attribute, value):
        raise AttributeError(f"'list' object has no attribute {attribute!r}")

    __delattr__ = __setattr__

    def __getitem__(self, index):
        got = super().__getitem__(index)
        return list(got) if isinstance(index, slice) else got

    def copy(self) -> list:
        return list(self)

    def __add__(self, other):
        return list(self) + (list(other) if isinstance(other, ArgumentList) else other)

    def __radd__(self, other):
        return other + list(self)

    def __mul__(self, n):
        return list(self) * n

    __rmul__ = __mul__

    def __eq__(self, other):
        return list(self) == (list(other) if isinstance(other, ArgumentList) else other)

    def __ne__(self, other):
        return not self == other

    def __repr__(self):
        return repr(list(self))


def fresh_array(spec: dict) -> np.ndarray:
    """The array of an ``$array`` spec, a copy of its own in the spec's layout (the default)."""
    return decode_array(spec)


def build_argument(spec, make_array=fresh_array, name: str = "argument"):
    """A case's argument as the student's function receives it (new objects every call; see above).

    ``make_array``: turns an ``$array`` spec into the memory passed (:meth:`Layout.view` for laid-out specs)."""
    if isinstance(spec, list):
        return ArgumentList([build_argument(s, make_array, name) for s in spec], name)
    if isinstance(spec, dict):
        if "$array" in spec:
            return argument_array(make_array(spec["$array"]), name)
        if "$tensor" in spec:
            import torch
            return argument_tensor(torch.from_numpy(make_array(spec["$tensor"]["$array"])), name)
        if "$mha" in spec:
            return mha_stand_in(spec["$mha"], make_array)
        if "$attn" in spec:
            return attention_stand_in(spec["$attn"], make_array, name)
        if "$decoder" in spec:
            return decoder_stand_in(spec["$decoder"], make_array)
        raise ValueError(f"unknown argument {sorted(spec)[:3]}")
    return spec


class _Unchangeable:
    """Attributes that cannot be set or deleted once made (the stand-ins below)."""
    _argument_name = "mha"  # the argument a change would be named by

    def __setattr__(self, attribute, value):
        _changed(self._argument_name, f"setting .{attribute}")

    def __delattr__(self, attribute):
        _changed(self._argument_name, f"deleting .{attribute}")

    def _make(self, **attributes):
        for attribute, value in attributes.items():
            object.__setattr__(self, attribute, value)


class LinearStandIn(_Unchangeable):
    """``mha.out_proj``: ``weight`` (d_out, d_in), ``bias`` (d_out,), and a call that is ``F.linear``."""

    def __init__(self, weight, bias, name: str = "mha"):
        self._make(weight=weight, bias=bias, out_features=weight.shape[0], in_features=weight.shape[1],
                   _argument_name=name)

    def __call__(self, x):
        import torch
        return torch.nn.functional.linear(x, self.weight, self.bias)

    def parameters(self):
        return iter([self.weight, self.bias])


class MhaStandIn(_Unchangeable):
    """What exercise 5's function receives as ``mha``: the attributes of a batch-first
    ``torch.nn.MultiheadAttention`` (its weights as plain tensors, its sizes), and a call that
    computes nothing (it raises TypeError saying so). The same in the visible and the hidden tests.
    None of its attributes can be set (the weights' elements are the caller's memory)."""

    def __init__(self, embed_dim: int, num_heads: int, weights: dict):
        self._make(embed_dim=embed_dim, num_heads=num_heads, head_dim=embed_dim // num_heads, kdim=embed_dim,
                   vdim=embed_dim, batch_first=True, training=False, dropout=0.0, add_zero_attn=False, bias_k=None,
                   bias_v=None, q_proj_weight=None, k_proj_weight=None, v_proj_weight=None,
                   in_proj_weight=weights["in_proj_weight"], in_proj_bias=weights["in_proj_bias"],
                   out_proj=LinearStandIn(weights["out_proj_weight"], weights["out_proj_bias"]))

    def __call__(self, *args, **kwargs):
        raise TypeError(NOT_A_MODULE)

    def state_dict(self) -> dict:
        return {"in_proj_weight": self.in_proj_weight, "in_proj_bias": self.in_proj_bias,
                "out_proj.weight": self.out_proj.weight, "out_proj.bias": self.out_proj.bias}

    def named_parameters(self):
        return iter(self.state_dict().items())

    def parameters(self):
        return iter(self.state_dict().values())


def mha_stand_in(spec: dict, make_array=fresh_array) -> MhaStandIn:
    """The stand-in of a case's ``{"$mha": ...}`` argument: its weights are tensors over the memory
    ``make_array`` gives (a change to their elements is seen there), unchangeable otherwise."""
    import torch
    weights = {k: argument_tensor(torch.from_numpy(make_array(v["$array"])), "mha")
               for k, v in spec["weights"].items()}
    return MhaStandIn(int(spec["embed_dim"]), int(spec["num_heads"]), weights)


NOT_A_LAYER = ("{name} holds the weights of the course's decoder (mha_lib.decoder), nothing more: calling it would be "
               "a ready-made answer, so here it computes nothing. Compute the attention yourself from its weights")


class NormStandIn(_Unchangeable):
    """A block's LayerNorm: ``weight``, ``bias`` (d_model,), ``eps``, and a call that is ``F.layer_norm``."""
    _argument_name = "decoder"

    def __init__(self, weight, bias, eps: float):
        self._make(weight=weight, bias=bias, eps=eps, normalized_shape=(int(weight.shape[0]),))

    def __call__(self, x):
        import torch
        return torch.nn.functional.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class FeedForwardStandIn(_Unchangeable):
    """A block's feed-forward network: ``linear1`` (d_ff, d_model), ``linear2`` (d_model, d_ff), and a call
    that is ``linear2(relu(linear1(x)))``."""
    _argument_name = "decoder"

    def __init__(self, linear1, linear2):
        self._make(linear1=linear1, linear2=linear2)

    def __call__(self, x):
        import torch
        return self.linear2(torch.relu(self.linear1(x)))


class AttentionStandIn(_Unchangeable):
    """What exercise 6 hands over as one decoder layer's attention (``mha_lib.decoder.CausalSelfAttention``
    with g = h): ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj`` (each ``weight`` (d_out, d_in), ``bias``, and
    callable as ``nn.Linear``), ``num_heads``, ``head_dim``, ``embed_dim``; a call computes nothing."""

    def __init__(self, embed_dim: int, num_heads: int, projections: dict, name: str = "attn"):
        self._make(embed_dim=embed_dim, num_heads=num_heads, num_kv_heads=num_heads,
                   head_dim=embed_dim // num_heads, _argument_name=name, **projections)

    def __call__(self, *args, **kwargs):
        raise TypeError(NOT_A_LAYER.format(name=self._argument_name))


class BlockStandIn(_Unchangeable):
    """One pre-norm decoder block: ``norm1``, ``self_attn`` (an :class:`AttentionStandIn`), ``norm2``,
    ``feed_forward`` (with ``linear1``, ``linear2``); a call computes nothing."""
    _argument_name = "decoder"

    def __init__(self, **parts):
        self._make(**parts)

    def __call__(self, *args, **kwargs):
        raise TypeError(NOT_A_LAYER.format(name="decoder"))


class DecoderStandIn(_Unchangeable):
    """What exercise 6 hands over as the course's decoder (``mha_lib.decoder.Decoder``): ``layers`` (a tuple
    of :class:`BlockStandIn`), ``norm`` (the final LayerNorm), ``num_heads``, ``embed_dim``; a call computes
    nothing."""
    _argument_name = "decoder"

    def __init__(self, layers: tuple, norm: NormStandIn, num_heads: int, embed_dim: int):
        self._make(layers=layers, norm=norm, num_heads=num_heads, embed_dim=embed_dim)

    def __call__(self, *args, **kwargs):
        raise TypeError(NOT_A_LAYER.format(name="decoder"))


PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


def attention_stand_in(spec: dict, make_array=fresh_array, name: str = "attn") -> AttentionStandIn:
    """The stand-in of an ``{"$attn": ...}`` argument (its weights: tensors over the memory ``make_array``
    gives, named ``name`` when changed)."""
    import torch

    def tensor(key):
        return argument_tensor(torch.from_numpy(make_array(spec["weights"][key]["$array"])), name)
    projections = {p: LinearStandIn(tensor(f"{p}_weight"), tensor(f"{p}_bias"), name) for p in PROJECTIONS}
    return AttentionStandIn(int(spec["embed_dim"]), int(spec["num_heads"]), projections, name)


def decoder_stand_in(spec: dict, make_array=fresh_array) -> DecoderStandIn:
    """The stand-in of a ``{"$decoder": ...}`` argument: ``spec`` holds ``eps``, ``norm`` ({weight, bias}) and
    ``layers``, each {attn, norm1, norm2, linear1, linear2} (arrays as in :func:`attention_stand_in`)."""
    import torch

    def tensor(value):
        return argument_tensor(torch.from_numpy(make_array(value["$array"])), "decoder")

    def norm(part):
        return NormStandIn(tensor(part["weight"]), tensor(part["bias"]), float(spec["eps"]))

    def linear(part):
        return LinearStandIn(tensor(part["weight"]), tensor(part["bias"]), "decoder")
    layers = tuple(BlockStandIn(norm1=norm(layer["norm1"]), norm2=norm(layer["norm2"]),
                                self_attn=attention_stand_in(layer["attn"], make_array, "decoder"),
                                feed_forward=FeedForwardStandIn(linear(layer["linear1"]), linear(layer["linear2"])))
                   for layer in spec["layers"])
    first = spec["layers"][0]["attn"]
    return DecoderStandIn(layers, norm(spec["norm"]), int(first["num_heads"]), int(first["embed_dim"]))


def invoke(fn, names: list[str], specs: list, make_array=fresh_array) -> dict:
    """Call ``fn`` on the arguments of ``specs`` (named ``names``): ``{"result": <encoded>}`` or
    ``{"error": {"type", "message", "line"}}``. Whether it changed them is for its caller to see
    (:class:`Layout`): what runs here is not asked."""
    args = [build_argument(s, make_array, n) for n, s in zip(names, specs)]
    try:
        return {"result": encode(fn(*args))}
    except BaseException as err:  # noqa: BLE001 - the student's error (even SystemExit) is data too
        return {"error": describe_error(err)}


def call(fn, names: list[str], specs: list) -> dict:
    """Call ``fn`` as the grader does (the visible tests, in the student's own process): its arrays laid out
    in a buffer compared after the call. The outcome as plain data: :func:`invoke`'s, plus ``"mutated"``,
    the names of the arguments whose memory the call changed."""
    layout = Layout(bytearray(max(Layout.size(specs), ALIGN)))
    outcome = invoke(fn, names, layout.lay_out(names, specs), layout.view)
    changed = layout.changed()
    return {**outcome, "mutated": [n for n in names if n in changed]}


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
