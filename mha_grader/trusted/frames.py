"""What a job sends back, checked against its schema before anything uses it.

Every record a sandbox returns is untrusted data: it came from a process inside the sandbox, and
the student's code ran in that sandbox. :func:`events` accepts a job's records only when each one
has the shape the harness writes (inside/harness.py's docstring), for the job's own tests and cases,
once each, with bounded counts, lengths, depths and array sizes (a returned value of more than
MAX_VALUES values is read as that fact alone, so the judge's work on one stays small). What a call gave
back is the student's process's word: a value or an error outside the schema (a list longer than
MAX_ITEMS, an integer beyond 64 bits) is read as "a value the grader cannot read", which costs that call's
test alone. Anything else outside the schema (the harness's own fields) raises :class:`Invalid` with one
sentence saying what was wrong, and that notebook "could not be graded".
Every string that can reach a page, a terminal or a CSV is made valid text (a lone surrogate
becomes U+FFFD, as does every control character but newline and tab) and cut to a stated length
here, at the boundary: the sinks escape what they print (report.py, feedback.py), and nothing
downstream sees an unbounded string.
"""
import base64
import math
import re

from mha_checks import calling

STATUSES = {"done", "timeout", "signal", "exit", "budget", "cells", "large", "spent", "wall"}
TIMES = ("cpu", "own", "wall", "notebook_cpu", "notebook_own")  # the seconds a test's status record says were spent
CAPS = {"label": 100, "type": 100, "message": 500, "name": 100, "value": 200, "detail": 100}
MAX_DEPTH, MAX_ITEMS, MAX_DIMS = 6, calling.MAX_ITEMS, 8
MAX_VALUES = calling.MAX_VALUES  # values in one returned value: past it, read as that fact (calling.at_most)
MAX_CELL_FAILURES = 1000
UNSAFE = re.compile("[\ud800-\udfff\x00-\x08\x0b-\x1f\x7f-\x9f]")  # lone surrogates, control characters


class Invalid(ValueError):
    """A record outside the schema; the message is one sentence for the instructor and student."""


def text(value, cap: int) -> str:
    """``value`` (a str) as valid text of at most ``cap`` characters."""
    if not isinstance(value, str):
        raise Invalid(f"a text field holds {type(value).__name__}, not text")
    value = UNSAFE.sub("\ufffd", value[:cap])
    return value if len(value) < cap else value[:cap - 1] + "…"


def events(records: list, job: dict) -> dict:
    """{test id: {"cases": {i: outcome}, "cells": [...], "status": (status, detail) | None, "time": {...}}}."""
    tests = {t["id"]: t for t in job["tests"]}
    if len(records) > 1 + sum(2 + len(t["cases"]) for t in job["tests"]):
        raise Invalid(f"the job sent {len(records)} records, more than its tests can have")
    found = {tid: {"cases": {}, "cells": [], "status": None, "time": {}} for tid in tests}
    for record in records:
        if record == {"harness": "started"}:
            continue
        test = record.get("test")
        if not isinstance(test, str) or test not in tests:
            raise Invalid(f"a record names a test that this notebook does not have ({_quote(test)})")
        _one(record, tests[test], found[test])
    return found


def _one(record: dict, test: dict, slot: dict) -> None:
    keys = set(record) - {"test"}
    if keys == {"case", "outcome"}:
        i = record["case"]
        if not _int(i) or not 0 <= i < len(test["cases"]) or i in slot["cases"]:
            raise Invalid(f"a result names a case that does not exist or came twice ({_quote(i)})")
        slot["cases"][i] = outcome(record["outcome"], test["cases"][i]["names"])
    elif keys == {"cells"}:
        if slot["cells"] or not isinstance(record["cells"], list) or len(record["cells"]) > MAX_CELL_FAILURES:
            raise Invalid("the list of cells that raised is malformed or came twice")
        slot["cells"] = [_failure(f, "label") for f in record["cells"]]
    elif keys == {"status", "detail", "time"}:
        status, detail = record["status"], record["detail"]
        if slot["status"] is not None or not isinstance(status, str) or status not in STATUSES:
            raise Invalid(f"a test's status is unknown or came twice ({_quote(status)})")
        if not (detail is None or _int(detail) or _number(detail) or isinstance(detail, str)):
            raise Invalid("a test's status has a detail that is not a number or text")
        slot["status"] = (status, text(detail, CAPS["detail"]) if isinstance(detail, str) else detail)
        slot["time"] = spent(record["time"])
    else:
        raise Invalid(f"a record has fields the harness never writes ({_quote(sorted(map(str, keys)))})")


def spent(value) -> dict:
    """The seconds a test's status record says it spent: {name: seconds} for each of TIMES, numbers below a year."""
    if not isinstance(value, dict) or set(value) != set(TIMES) \
            or not all((_int(v) or _number(v)) and abs(v) < 3e7 for v in value.values()):
        raise Invalid(f"a test's time is not the harness's ({', '.join(TIMES)}: seconds)")
    return {name: float(value[name]) for name in TIMES}


def outcome(value, names: list[str]) -> dict:
    """One call's outcome: {"result"} or {"error"} or {"missing"}, and "mutated"."""
    if not isinstance(value, dict) or not set(value) <= {"result", "error", "missing", "mutated"}:
        raise Invalid("a call's outcome is not the harness's (unknown fields)")
    out: dict = {}
    mutated = value.get("mutated", [])
    if not isinstance(mutated, list) or not all(isinstance(n, str) and n in names for n in mutated):
        raise Invalid("a call's list of arguments changed in place names arguments the call does not have")
    out["mutated"] = list(dict.fromkeys(mutated))
    try:  # (what the call gave back: the child's words, which its test alone answers for)
        if "result" in value:
            out["result"] = result(value["result"]) if calling.at_most(value["result"]) \
                else dict(calling.TOO_MANY_VALUES)
        if "error" in value:
            out["error"] = _failure(value["error"], None)
        if "missing" in value:
            out["missing"] = text(value["missing"], CAPS["name"])
    except Invalid as err:
        out = {"mutated": out["mutated"], "result": {"$other": text(f"value the grader cannot read: {err}",
                                                                     CAPS["name"])}}
    return out


def _failure(value, label: str | None) -> dict:
    """An error as describe_error writes it (and, for a cell, its label)."""
    fields = {"type", "message", "line"} | ({label} if label else set())
    if not isinstance(value, dict) or set(value) != fields:
        raise Invalid("an error record does not have the fields type, message and line")
    line = value["line"]
    if not (line is None or _int(line)):
        raise Invalid("an error record's line is not a number")
    out = {"type": text(value["type"], CAPS["type"]), "message": text(value["message"], CAPS["message"]),
           "line": line}
    if label:
        out["label"] = text(value[label], CAPS["label"])
    return out


def result(value, depth: int = 0):
    """A returned value as calling.encode writes it (strings cut, arrays checked for size)."""
    if depth > MAX_DEPTH:
        raise Invalid("a returned value is nested deeper than the harness ever writes")
    if value is None or isinstance(value, bool) or _int(value) or _number(value, finite=False):
        return value
    if isinstance(value, str):
        return text(value, CAPS["value"])
    if isinstance(value, list):
        if len(value) > MAX_ITEMS:
            raise Invalid(f"a returned list has {len(value)} items, more than {MAX_ITEMS}")
        return [result(v, depth + 1) for v in value]
    if isinstance(value, dict) and len(value) == 1:
        (tag, inner), = value.items()
        if tag == "$array":
            return {tag: array(inner)}
        if tag == "$tensor" and isinstance(inner, dict) and set(inner) == {"$array"}:
            return {tag: {"$array": array(inner["$array"])}}
        if tag == "$tuple" and isinstance(inner, list):
            return {tag: result(inner, depth + 1)}
        if tag == "$other":
            return {tag: text(inner, CAPS["name"])}
    raise Invalid("a returned value is not one the harness writes (an unknown tag or type)")


def array(spec) -> dict:
    """An encoded array whose dtype, shape and data agree, within calling.MAX_ELEMENTS."""
    if not isinstance(spec, dict) or set(spec) != {"dtype", "shape", "data"}:
        raise Invalid("an array record does not have the fields dtype, shape and data")
    dtype, shape, data = spec["dtype"], spec["shape"], spec["data"]
    if not isinstance(dtype, str) or dtype not in calling.DTYPES or not isinstance(shape, list) \
            or len(shape) > MAX_DIMS or not all(_int(n) and 0 <= n <= calling.MAX_ELEMENTS for n in shape):
        raise Invalid("an array record has an unknown dtype or a malformed shape")
    if math.prod(shape) > calling.MAX_ELEMENTS or not isinstance(data, str):
        raise Invalid(f"an array record holds more than {calling.MAX_ELEMENTS} elements")
    size = math.prod(shape) * {"float16": 2, "float32": 4, "float64": 8, "int8": 1, "int16": 2, "int32": 4,
                               "int64": 8, "uint8": 1, "bool": 1}[dtype]
    if len(data) != 4 * -(-size // 3):
        raise Invalid("an array record's data does not match its shape")
    try:
        base64.b64decode(data, validate=True)
    except ValueError:
        raise Invalid("an array record's data is not base64") from None
    return {"dtype": dtype, "shape": list(shape), "data": data}


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1 << 63


def _number(value, finite: bool = True) -> bool:
    return isinstance(value, float) and (math.isfinite(value) or not finite)


def _quote(value) -> str:
    return text(repr(value), 60)
