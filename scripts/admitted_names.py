"""Generate ``mha_checks/admission/admitted.py``: every name the ready-made rule admits, read from the pinned
libraries themselves, and every name it leaves out, by family, with the reason.

    .venv/bin/python scripts/admitted_names.py           # rewrite mha_checks/admission/admitted.py
    .venv/bin/python scripts/admitted_names.py --check   # exit 1 if the committed file differs

The output is reviewed like code (``git diff`` shows what a new torch or NumPy adds), and
``tests/test_admission_closure.py`` checks that it is what this script makes from the installed
libraries and walks everything it admits (``mha_checks/admission/walk.py``).

How names are chosen. For each admitted module, its public names (no leading ``_``) are taken from
the module itself; a name is admitted unless it falls in one of the FAMILIES below, each with the
reason it is left out (the rule quotes that reason when it refuses the name). The attributes a value
may have are the public attributes of the types a graded function handles (VALUE_TYPES: tensors,
arrays, their scalars, dtypes and devices, sizes, named tuples, generators, containers, strings,
numbers, torch's layers and the exercises' stand-ins of exercises 5 and 6), by the same families. Small standard-library
modules are admitted by short lists written here (STDLIB), since only a few of their names are
maths. Modules themselves are never members: a submodule is admitted by an entry of its own.
"""
import argparse
import builtins
import dataclasses
import re
import sys
import types
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from mha_checks import calling  # noqa: E402 - the stand-in's own fields

OUTPUT = REPO / "mha_checks" / "admission" / "admitted.py"


@dataclasses.dataclass(frozen=True)
class Family:
    name: str
    reason: str    # completes "`np.load` ..." in a refusal
    names: frozenset = frozenset()
    pattern: str | None = None
    where: frozenset | None = None  # the modules (or "values") it applies to; None: everywhere

    def holds(self, name: str, where: str) -> bool:
        if self.where is not None and where not in self.where:
            return False
        return name in self.names or bool(self.pattern and re.search(self.pattern, name, re.I))


def _names(text: str) -> frozenset:
    return frozenset(text.split())


FAMILIES = [
    Family("ready-made attention",
           "is torch's own attention (or a layer built on it): a ready-made answer earns no credit",
           pattern=r"attention|transformer|multi_?head|sdpa|flash"),
    Family("files, pickles and processes",
           "reads or writes files, unpickles (which runs code) or starts processes; the exercises use none",
           _names("load save savez savez_compressed loadtxt savetxt genfromtxt fromfile fromregex memmap from_file "
                  "tofile dump get_file_path prepare_multiprocessing_environment import_ir_module "
                  "import_ir_module_from_buffer PyTorchFileReader PyTorchFileWriter")),
    Family("raw memory",
           "reads or writes memory by address, or reinterprets raw bytes (not memory-safe)",
           _names("frombuffer from_dlpack to_dlpack ctypes ctypeslib data_ptr storage untyped_storage storage_type "
                  "set_ share_memory_ share_memory is_shared getfield setfield setflags flags "
                  "bit_generator is_storage const_data_ptr mutable_data_ptr Storage TypedStorage UntypedStorage StorageBase "
                  "BitGenerator MT19937 PCG64 PCG64DXSM Philox SFC64"),
           pattern=r"Storage$|bit_generator"),  # (np.random.set_bit_generator(array) corrupts NumPy's state)
    Family("code compilation, tracing and the runtime's machinery",
           "compiles or traces code, or is part of torch's runtime (TorchScript, dispatch, streams, "
           "symbolic sizes, logging), not maths",
           _names("compile while_loop vmap fork wait parse_ir parse_schema parse_type_comment "
                  "merge_type_from_type_comment unify_type_list classproperty read_vitals set_vital vitals_enabled "
                  "FileCheck AVG SUM PRIVATE_OPS info show_config show_runtime test get_include")),
    Family("modules by name", "returns a module, which the rule never hands to a value",
           _names("get_device_module")),  # (found by mha_checks/admission/walk.py)
    Family("imports by a string", "imports a module and reads its attributes by a dotted name given at run "
           "time (any module, any attribute: a way around the rule); use torch.set_default_dtype",
           _names("set_default_tensor_type"), where=frozenset({"torch"})),
    Family("parallel and distributed runtime", "runs modules on several devices, threads or processes",
           _names("DataParallel SyncBatchNorm"), where=frozenset({"torch.nn"})),
    Family("code compilation, tracing and the runtime's machinery",  # (numpy.linalg.cond is maths)
           "compiles or traces code, or is part of torch's runtime (TorchScript, dispatch, streams, "
           "symbolic sizes, logging), not maths", _names("cond"), where=frozenset({"torch"})),
    Family("autograd's graph",
           "hands out autograd's graph of the computation (its nodes hold the library's functions); "
           "use .detach(), .requires_grad or .grad",
           _names("grad_fn"), where=frozenset({"values", "bases"})),
    Family("memory freed under views",  # (found from outside: a view then reads and writes freed memory)
           "frees or moves an array's memory while its views may still point at it (ndarray.resize with "
           "refcheck=False is not memory-safe); use np.resize, reshape or np.concatenate, which make new arrays",
           _names("resize"), where=frozenset({"values"})),
    Family("sparse tensors",  # (found from outside: to_sparse(), then indices().fill_(...), then to_dense() crashed)
           "makes a sparse tensor or hands out its indices, and torch does not check a sparse tensor's indices "
           "(its own warning: memory errors, a segfault among them, follow); the exercises use dense tensors",
           _names("sparse_coo_tensor sparse_csr_tensor sparse_csc_tensor sparse_bsr_tensor sparse_bsc_tensor "
                  "sparse_compressed_tensor sparse_coo sparse_csr sparse_csc sparse_bsr sparse_bsc to_sparse "
                  "to_sparse_coo to_sparse_csr to_sparse_csc to_sparse_bsr to_sparse_bsc crow_indices col_indices "
                  "ccol_indices row_indices Embedding EmbeddingBag embedding embedding_bag")),
    Family("generator state from raw words",  # (found from outside: a position past the key read memory until it crashed)
           "sets a random generator's state from raw words, and NumPy's legacy generator does not check the "
           "position it is given (one past its key reads memory out of bounds); seed it instead (np.random.seed, "
           "np.random.default_rng(seed), torch.manual_seed)", _names("set_state")),
    Family("callbacks the library calls later",
           "registers a function the library calls later with its own objects (hooks)",
           pattern=r"^register_.*hook"),
    Family("module entry points",
           "calls a library module's forward, one of torch's entry points (with the module handed to exercise 5, "
           "torch's own answer); "
           "call a layer as layer(x)",
           _names("forward"), where=frozenset({"values"})),
    Family("arrays over a buffer",
           "builds an array over a raw buffer (ndarray(buffer=..., strides=...) is not memory-safe); "
           "it may be named in isinstance and annotations only",
           _names("ndarray recarray")),
    Family("introspection of annotations",
           "hands out a class's annotations (any object, np.ndarray among them) as values",
           _names("fields"), where=frozenset({"dataclasses"})),
]
FAMILIES.append(Family("what an exception carries",
                       "is what an exception carries (the library's own objects, a module among them, may be in it)",
                       _names("value args obj object code exceptions filename filename2"),
                       where=frozenset({"values"})))  # (an exception of the student's own carries their values)
FAMILIES.append(Family("Cython classes",
                       "is a class whose methods, read from the class, do not check the object they are called on "
                       "(called on another object, they crash the process: not memory-safe); use the instance "
                       "np.random.default_rng() returns"))
FAMILIES.append(Family("attributes by a string", "reads attributes by a name built at run time (a way around "
                       "the rule)", _names("attrgetter methodcaller"), where=frozenset({"operator"})))
MEMBER_FAMILIES = {("numpy.lib.stride_tricks", "as_strided"): "raw memory"}  # left out of a positive list
NOT_CALLED_FAMILY = "arrays over a buffer"  # admitted as names (isinstance, annotations), never called


def family(name: str, where: str) -> Family | None:
    return next((f for f in FAMILIES if f.holds(name, where)), None)


# --- module members ------------------------------------------------------------------------------

TORCH_CLASSES = {torch.Size, torch.device, torch.dtype, torch.finfo, torch.iinfo, torch.layout, torch.memory_format,
                 torch.Generator, torch.no_grad, torch.enable_grad, torch.inference_mode, torch.set_grad_enabled}
TORCH_CLASS_REASON = ("is part of torch's runtime (TorchScript IR, compilation units, storages, streams, "
                      "dispatch keys, symbolic sizes, serialisers, benchmarks), not maths")

STDLIB = {  # module -> names (a few maths helpers each)
    "math": None,  # every public name: functions of numbers and constants
    "itertools": None,
    "operator": "abs add and_ concat contains countOf eq floordiv ge getitem gt index indexOf inv invert is_ is_not "
                "itemgetter le length_hint lshift lt matmul mod mul ne neg not_ or_ pos pow rshift sub truediv truth "
                "xor",  # not attrgetter/methodcaller: attributes by a string
    "functools": "partial reduce wraps lru_cache cache cached_property total_ordering",
    "collections": "namedtuple OrderedDict defaultdict deque Counter",
    "dataclasses": "dataclass field asdict astuple replace is_dataclass",  # not fields: annotations as values
    "typing": "Any Optional Union List Tuple Dict Set FrozenSet Sequence Callable Iterable Iterator Generator "
              "Mapping NamedTuple Literal TypeVar Final ClassVar TYPE_CHECKING cast",
    "time": "perf_counter perf_counter_ns time time_ns monotonic monotonic_ns process_time process_time_ns",
    "random": "random seed uniform gauss normalvariate randint randrange choice choices shuffle sample",
    "warnings": "warn",
    "copy": "copy deepcopy",  # copies of what is already held (the Annotated Transformer's clones)
}
PATHS = {"numpy.lib": "", "torch.backends": ""}  # admitted only as the way to their admitted submodules
POSITIVE = {  # torch and NumPy modules where only a few names are wanted
    "numpy.lib.stride_tricks": "sliding_window_view",  # as_strided: raw memory (see FAMILIES)
    "numpy.typing": "NDArray ArrayLike DTypeLike",
    "torch.cuda": "is_available device_count",
    "torch.backends.mps": "is_available is_built",
}


def _public(module) -> list[str]:
    return sorted(n for n in dir(module) if not n.startswith("_"))


def members(module_name: str) -> tuple[list[str], dict[str, list[str]]]:
    """(admitted names, {family: excluded names}) of one module."""
    module = __import__(module_name, fromlist=["_"])
    admitted, excluded = [], {}
    for name in _public(module):
        obj = getattr(module, name)
        why = _excluded_member(module_name, name, obj)
        if why is None:
            admitted.append(name)
        elif why:
            excluded.setdefault(why, []).append(name)
    return admitted, excluded


def _excluded_member(module_name: str, name: str, obj) -> str | None:
    """The family that leaves ``module.name`` out; "" for names that are not members at all (modules,
    re-exported helpers of another package); None when admitted."""
    if isinstance(obj, types.ModuleType):
        return ""
    f = family(name, module_name)
    if f is not None:
        return f.name
    if module_name == "torch" and isinstance(obj, type) and not (
            obj in TORCH_CLASSES or issubclass(obj, torch.Tensor) or type(obj).__name__ == "tensortype"):
        return "torch's runtime classes"
    if module_name == "torch" and type(obj).__module__ == "torch" and type(obj).__name__ == "AggregationType":
        return "torch's runtime classes"
    home = getattr(obj, "__module__", None) or ""
    if module_name == "torch.nn" and not (isinstance(obj, type) and issubclass(obj, nn.Module | torch.Tensor)):
        return ""
    if module_name in ("torch.nn.functional", "torch.nn.init", "torch.testing", "torch.special") and (
            isinstance(obj, type) or not callable(obj) or not home.startswith("torch")):
        return ""  # typing helpers, classes and constants they import
    if module_name in ("torch.nn.functional",) and name in ("has_torch_function", "has_torch_function_unary",
                                                             "has_torch_function_variadic", "handle_torch_function",
                                                             "boolean_dispatch"):
        return "torch's runtime classes"
    if isinstance(obj, type) and any(type(v).__name__ == "cython_function_or_method" for v in vars(obj).values()):
        return "Cython classes"  # (found by mha_checks/admission/walk.py: Generator.normal(tensor) crashed it)
    if module_name == "numpy.random" and isinstance(obj, type):
        return "raw memory"  # the bit generators: ctypes and cffi pointers to their state
    if module_name == "numpy.testing" and not name.startswith("assert_"):
        return ""
    return None


def _record_left_out(module_name: str, module, listed: list, excluded: dict) -> None:
    """The names a short list leaves out that a family names (the others are simply not needed)."""
    for name in _public(module):
        f = family(name, module_name)
        why = MEMBER_FAMILIES.get((module_name, name)) or (f.name if f else None)
        if name not in listed and why:
            excluded.setdefault(why, {}).setdefault(module_name, []).append(name)


def module_table() -> tuple[dict, dict, dict]:
    """({module: admitted names or None (every public name)}, {family: {module: excluded}}, {module: not called})."""
    table, excluded, not_called = {}, {}, {}
    for name, names in STDLIB.items():
        module = __import__(name)
        if names is None:
            table[name] = None
            continue
        listed = names.split()
        missing = [n for n in listed if not hasattr(module, n)]
        assert not missing, f"{name} has no {missing}"
        table[name] = sorted(listed)
        _record_left_out(name, module, listed, excluded)
    for name in PATHS:
        table[name] = []
    for name, names in POSITIVE.items():
        module = __import__(name, fromlist=["_"])
        listed = [n for n in names.split() if hasattr(module, n)]
        table[name] = sorted(listed)
        _record_left_out(name, module, listed, excluded)
    for name in ("numpy", "numpy.linalg", "numpy.random", "numpy.testing", "torch", "torch.nn",
                 "torch.nn.functional", "torch.nn.init", "torch.linalg", "torch.special", "torch.testing"):
        admitted, out = members(name)
        for why, names in out.items():
            excluded.setdefault(why, {})[name] = names
        table[name] = admitted
    for name in ("numpy",):  # ndarray and recarray: names for isinstance and annotations, never called
        fam = next(f for f in FAMILIES if f.name == NOT_CALLED_FAMILY)
        names = sorted(n for n in fam.names if hasattr(np, n))
        table[name] = sorted(set(table[name]) | set(names))
        not_called[name] = names
        excluded[NOT_CALLED_FAMILY][name] = [n for n in excluded[NOT_CALLED_FAMILY][name] if n not in names]
        if not excluded[NOT_CALLED_FAMILY][name]:
            del excluded[NOT_CALLED_FAMILY][name]
    excluded = {k: v for k, v in excluded.items() if v}
    return table, excluded, not_called


# --- the attributes of values --------------------------------------------------------------------

def _layers() -> list[type]:
    return sorted({getattr(nn, n) for n in members("torch.nn")[0]}, key=lambda c: c.__name__)


def _layer_instances() -> list:
    """One instance of each admitted layer that builds from small sizes (its attributes are set in
    __init__, so they are read from an instance)."""
    out = []
    for cls in _layers():
        if not issubclass(cls, nn.Module):
            continue
        for args in ((), (3,), (3, 4), (3, 4, 2), ([3],), (2, 4), (1, (2, 2)), ("LSTM", 3, 4), (3, 4, True, 4),
                     (4, 6, [2])):
            try:
                out.append(cls(*args))
                break
            except Exception:  # noqa: BLE001 - a layer that needs other arguments: the next pattern
                continue
        else:  # (its instances' attributes would be unknown: add a pattern that builds it)
            raise SystemExit(f"no sample of torch.nn.{cls.__name__}: add arguments that build it")
    return out


def _instance_names(obj) -> set[str]:
    names = set(vars(obj))
    for part in ("_parameters", "_buffers", "_modules"):
        names |= set(getattr(obj, part, {}) or {})
    return names


def value_types() -> dict[str, list]:
    """Kinds of values a graded function handles -> their types or sample instances."""
    stand_in = calling.MhaStandIn(4, 2, {k: torch.zeros(4, 4) for k in ("in_proj_weight", "in_proj_bias",
                                                                       "out_proj_weight", "out_proj_bias")})
    decoder = _decoder_stand_in()
    block = decoder.layers[0]
    return {
        "tensors": [torch.Tensor, nn.Parameter],
        "arrays and their scalars": [np.ndarray, np.generic, np.float64, np.int64, np.bool_, np.ufunc, np.flatiter],
        "dtypes, devices, sizes, limits": [np.dtype, torch.dtype, torch.device, torch.Size, torch.finfo, torch.iinfo,
                                           np.finfo, np.iinfo, torch.layout, torch.memory_format],
        "named tuples of torch's results": [c for c in vars(torch.return_types).values() if isinstance(c, type)],
        "random generators": [np.random.Generator, np.random.RandomState, torch.Generator],
        "numbers, strings and containers": [int, float, complex, bool, str, bytes, list, tuple, dict, set, frozenset,
                                            range, slice, type({}.keys()), type({}.items()), type({}.values())],
        "collections": [__import__("collections").deque, __import__("collections").OrderedDict,
                        __import__("collections").defaultdict, __import__("collections").Counter],
        "layers": [nn.Module] + _layers() + _layer_instances(),
        "the exercise-5 stand-in": [stand_in, stand_in.out_proj],
        "the exercise-6 stand-ins (the course decoder's weights)": [
            decoder, decoder.norm, block, block.self_attn, block.self_attn.q_proj, block.feed_forward],
    }


def _decoder_stand_in():
    """Exercise 6's decoder as the graded functions receive it (mha_checks.calling.decoder_stand_in), one block."""
    def pair(*shape):
        return {"weight": calling.encode_array(np.zeros(shape)), "bias": calling.encode_array(np.zeros(shape[0]))}
    attn = {"embed_dim": 4, "num_heads": 2, "weights": {f"{p}_{w}": calling.encode_array(np.zeros((4, 4) if w ==
                                                                                                 "weight" else 4))
                                                        for p in calling.PROJECTIONS for w in ("weight", "bias")}}
    layer = {"attn": attn, "norm1": pair(4), "norm2": pair(4), "linear1": pair(6, 4), "linear2": pair(4, 6)}
    return calling.decoder_stand_in({"eps": 1e-5, "layers": [layer], "norm": pair(4)})


def value_attributes() -> tuple[list[str], dict[str, list[str]]]:
    admitted, excluded = set(), {}
    for kinds in value_types().values():
        for kind in kinds:
            names = set(dir(kind)) | (_instance_names(kind) if not isinstance(kind, type) else set())
            for name in names:
                if name.startswith("_"):
                    continue
                f = family(name, "values")
                if f is None:
                    admitted.add(name)
                else:
                    excluded.setdefault(f.name, set()).add(name)
    return sorted(admitted), {k: sorted(v) for k, v in excluded.items()}


def _bases() -> list[type]:
    """The library classes a notebook class may derive from (mha_checks.admission.classes.base_class)."""
    return [object, nn.Module, nn.Parameter, torch.Tensor, tuple, list, dict, set, BaseException] + _layers() + [
        v for v in vars(builtins).values() if isinstance(v, type) and issubclass(v, BaseException)]


def base_surface(value_names: set[str]) -> tuple[list[str], list[str], list[str]]:
    """(public refused, private, held) names of the library classes a notebook class may derive from:
    the public names of the families the rule does not admit on the student's own objects, every private
    name, and every name an instance may hold that the library sets or defines (dir() of each base, and
    the attributes a sample instance holds: a layer's ``weight``, nn.Module's ``_modules``). A held name of
    a notebook object is never known to hold the student's own object: the library may have set it."""
    public, private, held = set(), set(), set()
    samples = [nn.Module(), nn.Parameter(torch.zeros(1)), torch.zeros(1)] + _layer_instances()
    names = [set(dir(base)) for base in _bases()] + [set(dir(s)) | _instance_names(s) for s in samples]
    for name in set().union(*names):
        if name.startswith("__") and name.endswith("__"):
            continue
        held.add(name)
        if name.startswith("_"):
            private.add(name)
        elif name not in value_names and family(name, "bases") is not None:
            public.add(name)
    return sorted(public), sorted(private), sorted(held)


def keyed_bases() -> list[str]:
    """torch.nn's containers whose items are also attributes under names given as data (ModuleDict,
    ParameterDict, Sequential...): a notebook class derived from one holds any name the library sets."""
    return sorted(c.__name__ for c in _layers() if issubclass(c, nn.Module) and "__getitem__" in vars(c))


# --- output --------------------------------------------------------------------------------------

def _wrap(names, indent: int = 4, width: int = 116) -> str:
    lines, line = [], ""
    for n in names:
        if line and len(line) + 1 + len(n) > width - indent:
            lines.append(line)
            line = n
        else:
            line = f"{line} {n}" if line else n
    lines.append(line)
    return "\n".join(" " * indent + ln for ln in lines)


def _names_literal(names, indent: int = 4) -> str:
    return 'frozenset("""\n' + _wrap(names, indent) + '\n""".split())'


def generate() -> str:
    table, excluded, not_called = module_table()
    values, value_excluded = value_attributes()
    own_public, own_private, held = base_surface(set(values))
    out = [f'''"""What the ready-made rule admits, generated by scripts/admitted_names.py from torch {torch.__version__.split("+")[0]}
and NumPy {np.__version__} (do not edit by hand: run the script, then review the diff). It is long because it
lists every name admitted and every name left out, module by module and family by family: search it for a name.

MODULES: each admitted module and the names it admits (None: every public name). VALUE_ATTRIBUTES: the
attributes any value may be read through. NOT_CALLED: names admitted in isinstance and annotations only.
OWN_REFUSED: names a notebook's own object may not use (its library base classes' machinery).
LIBRARY_HELD: every name the library may set or define on an object of a notebook class (never known to
hold the student's own object). KEYED_BASES: torch.nn's containers whose items are attributes of any name.
EXCLUDED: every public name left out, by family, and FAMILIES: why (the rule's refusals quote it).
"""
TORCH_VERSION = "{torch.__version__.split("+")[0]}"
NUMPY_VERSION = "{np.__version__}"

FAMILIES = {{''']
    for f in FAMILIES:
        out.append(f"    {f.name!r}: {f.reason!r},")
    out.append(f"    \"torch's runtime classes\": {TORCH_CLASS_REASON!r},")
    out.append("}\n\nMODULES = {")
    for name in sorted(table):
        names = table[name]
        if names is None:
            out.append(f"    {name!r}: None,")
        elif not names:
            out.append(f"    {name!r}: frozenset(),")
        else:
            out.append(f"    {name!r}: " + _names_literal(names, 8) + ",")
    out.append("}\n\nNOT_CALLED = {")
    for name in sorted(not_called):
        out.append(f"    {name!r}: frozenset({sorted(not_called[name])!r}),")
    out.append("}\n\nVALUE_ATTRIBUTES = " + _names_literal(values) + "\n")
    out.append("OWN_REFUSED = " + _names_literal(own_public) + "\n")
    out.append("OWN_PRIVATE_REFUSED = " + _names_literal(own_private) + "\n")
    out.append("LIBRARY_HELD = " + _names_literal(held) + "\n")
    out.append("KEYED_BASES = frozenset(" + repr(keyed_bases()) + ")\n")
    out.append("EXCLUDED = {  # family -> {module or 'values': names}")
    for fam in sorted(set(excluded) | set(value_excluded)):
        out.append(f"    {fam!r}: {{")
        for module, names in sorted(excluded.get(fam, {}).items()):
            out.append(f"        {module!r}: " + _names_literal(names, 12) + ",")
        if fam in value_excluded:
            out.append("        'values': " + _names_literal(value_excluded[fam], 12) + ",")
        out.append("    },")
    out.append("}\n")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if mha_checks/admission/admitted.py differs")
    text = generate()
    if parser.parse_args().check:
        same = OUTPUT.exists() and OUTPUT.read_text() == text
        print("mha_checks/admission/admitted.py is " + ("up to date" if same else "stale: run scripts/admitted_names.py"))
        return 0 if same else 1
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
