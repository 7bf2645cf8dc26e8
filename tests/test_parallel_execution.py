"""site/parallel_execution.py: a book's notebooks run at the same time, and myst-nb uses their results.

A scratch book of three small MyST notebooks and a failing one is built with
`jupyter-book build -W -n --keep-going` and the extension: each good notebook notes when it
started and ended (it waits until another one has started), so the test sees runs overlap; myst-nb must then find
each in its cache ("Using cached notebook", not executed again) and the pages must carry their
outputs. The failing notebook is left to myst-nb, which reports it, and the strict build fails.
A notebook that sets its own cell timeout (chapter 7 does) runs at once with the others, under
its own limit: one that waits in a cell past that limit fails, although the book's limit is longer.
"""
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
JB = Path(sys.executable).with_name("jupyter-book")
FRONT = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
    format_version: 0.13
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""
needs_two_cores = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: nothing runs at once")


def notebook(name: str, body: str) -> str:
    return FRONT + f"# {name}\n\n```{{code-cell}} ipython3\n{textwrap.dedent(body).strip()}\n```\n"


def with_timeout(page: str, seconds: int) -> str:
    """The page with its own cell timeout in its metadata, as a chapter sets it."""
    return page.replace("\n---\n", f"\nmystnb:\n  execution_timeout: {seconds}\n---\n", 1)


def stamp(name: str) -> str:
    """A notebook that notes it started, waits (60 s at most) until another one has, and notes its span.

    Run at once, the first two meet, so the first is still running when the second starts, however
    slowly kernels start; run one after another, the first waits in vain and no spans overlap.
    """
    return notebook(name, f"""
        import pathlib, time
        start = time.time(); pathlib.Path("{name}.started").touch()
        while time.time() - start < 60 and not set(pathlib.Path().glob("*.started")) - {{pathlib.Path("{name}.started")}}:
            time.sleep(0.05)
        pathlib.Path("{name}.times").write_text(f"{{start}} {{time.time()}}")
        print("ran {name}")""")


def build(book: Path, pages: dict[str, str]) -> subprocess.CompletedProcess:
    for name, text in pages.items():
        (book / f"{name}.md").write_text(text)
    (book / "_toc.yml").write_text("format: jb-book\nroot: " + next(iter(pages)) + "\nchapters:\n"
                                   + "".join(f"  - file: {name}\n" for name in list(pages)[1:]))
    (book / "_config.yml").write_text(textwrap.dedent(f"""\
        title: scratch
        only_build_toc_files: true
        execute:
          execute_notebooks: cache
          run_in_temp: false
        sphinx:
          local_extensions:
            parallel_execution: {ROOT / "site"}
        """))
    return subprocess.run([str(JB), "build", "-W", "-n", "--keep-going", "."], cwd=book, capture_output=True,
                          text=True, env={**os.environ, "NO_COLOR": "1"}, timeout=300)


@needs_two_cores
def test_notebooks_run_at_once_myst_nb_uses_their_results_and_reports_a_failure(tmp_path):
    names = ["one", "two", "three"]
    proc = build(tmp_path, {**{name: stamp(name) for name in names[:2]},
                            names[2]: with_timeout(stamp(names[2]), 600),
                            "bad": notebook("bad", "raise ValueError('on purpose')"),
                            "slow": with_timeout(notebook("slow", "import time; time.sleep(8)"), 2)})
    log = proc.stdout + proc.stderr
    assert log.count("Executing notebook in parallel") == 5 and len(re.findall(r"Executed notebook in", log)) == 3
    # the three good ones come from the cache; only the failing ones are executed again, and reported
    assert log.count("Using cached notebook") == 3 and log.count("Executing notebook using") == 2, log[-3000:]
    assert log.count("Execution failed; executed again when read") == 2
    assert re.search(r"slow\.md.*Executing notebook failed", log), log[-3000:]
    assert "timed out" in (tmp_path / "_build" / "html" / "reports" / "slow.err.log").read_text()
    assert re.search(r"bad\.md.*Executing notebook failed", log), log[-3000:]
    assert "on purpose" in (tmp_path / "_build" / "html" / "reports" / "bad.err.log").read_text()
    assert proc.returncode != 0, "the strict build passed with a failing notebook"
    spans = sorted(tuple(map(float, (tmp_path / f"{n}.times").read_text().split())) for n in names)
    assert any(b[0] < a[1] for a, b in zip(spans, spans[1:])), f"no two notebooks ran at the same time: {spans}"
    for name in names:
        assert f"ran {name}" in (tmp_path / "_build" / "html" / f"{name}.html").read_text()
