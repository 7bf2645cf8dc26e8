"""The grader's rooms (mha_grader/__init__.py): its imports form no circle and go one way, trusted/ ->
walls/, and what runs in a job or in the fork server imports nothing of the checkout but by file.

Read from the source (every import statement, in a function too), nothing imported."""
import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "mha_grader"
BY_FILE = {"walls/forkserver.py", "walls/kernel.py", "walls/cgroups.py"}  # loaded by file in the fork server
THIRD_PARTY = {"numpy", "torch", "pyseccomp"}  # what a job and the fork server may import besides the stdlib


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(name: str) -> set[str]:
    """The absolute names ``name`` imports (a name imported from a package: that module, if it is one)."""
    path = MODULES[name]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]).strip(".") \
                if node.level else node.module
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return found


def room(name: str) -> str:
    return name.split(".")[1] if name.count(".") >= 2 else ""


def test_the_imports_of_the_grader_form_no_circle():
    arrows = {name: {m for m in imports(name) if m in MODULES and m != name} for name in MODULES}
    done, path = set(), []

    def visit(name: str) -> None:
        assert name not in path, "an import circle: " + " -> ".join(path[path.index(name):] + [name])
        if name in done:
            return
        path.append(name)
        for target in sorted(arrows[name]):
            visit(target)
        path.pop()
        done.add(name)

    for name in MODULES:
        visit(name)
    assert sum(map(len, arrows.values())) > 30  # (the walk read the package's imports)


def test_the_rooms_import_one_way():
    """trusted/ may import walls/; walls/ never imports trusted/; inside/ imports nothing of the package."""
    crossing = {(room(name), room(m)) for name in MODULES for m in imports(name) if m in MODULES}
    assert ("trusted", "walls") in crossing
    assert not {pair for pair in crossing if pair[0] != pair[1]} - {("trusted", "walls"), ("", "trusted")}, crossing


def test_what_a_job_and_the_fork_server_run_imports_nothing_of_the_checkout_but_by_file():
    """A job's /job holds inside/ and mha_checks/calling.py, which import one another by file name; the fork
    server loads its modules by file, with the checkout off sys.path: none of them may import a package of
    the checkout (it would not be found there), nor anything but the standard library, numpy, torch and
    pyseccomp."""
    inside = {p.stem for p in (PACKAGE / "inside").glob("*.py")} | {"calling"}
    for name, path in MODULES.items():
        rel = str(path.relative_to(PACKAGE))
        if not (rel.startswith("inside/") or rel in BY_FILE):
            continue
        tops = {m.split(".")[0] for m in imports(name)}
        strangers = tops - set(sys.stdlib_module_names) - THIRD_PARTY - (inside if rel.startswith("inside/") else set())
        assert not strangers, f"{rel} imports {sorted(strangers)}"
