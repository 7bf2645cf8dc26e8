"""Execute the chapters at the same time, one per CPU core, before Sphinx reads them.

With ``execute_notebooks: cache`` myst-nb executes a notebook when Sphinx reads it, one after
the other, so a cold ``make book`` on a 2-core machine leaves a core idle for as long as the
chapters run. This extension runs first: at ``env-before-read-docs`` it reads each notebook about
to be read exactly as myst-nb will (its own reader and configuration), asks jupyter-cache which of
them it does not hold yet, executes those in worker processes (as many as the cores this process
may use), and stores each result in the same cache. myst-nb then finds them there ("Using cached
notebook"). Nothing else changes:

* a notebook that fails is not stored, so myst-nb executes it again while reading it and reports
  the error as it always does (the strict build fails on it);
* a notebook whose metadata sets its own ``execution_timeout`` (a cell's limit) runs here under
  that limit, as myst-nb would run it; one whose metadata changes anything else about how it is
  executed, or that matches ``execution_excludepatterns``, is left to myst-nb;
* each notebook is logged like myst-nb logs it ("<path>: Executing notebook",
  "<path>: Executed notebook in N seconds"), which bench/bench_build.py reads.
"""
from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path, PurePosixPath

from sphinx.util import logging

LOGGER = logging.getLogger(__name__)


def _execute(notebook, cwd: str, allow_errors: bool, timeout: int | None):
    """In a worker: run every cell (a kernel of its own). Returns the notebook, seconds, error text."""
    from jupyter_cache.executors.utils import single_nb_execution

    result = single_nb_execution(notebook, cwd=cwd, allow_errors=allow_errors, timeout=timeout,
                                 meta_override=True)
    return notebook, result.time, None if result.err is None else result.exc_string


def _to_execute(app, env, docnames):
    """(docname, path, notebook, reader format, cell timeout) of each notebook that myst-nb would
    execute now."""
    from jupyter_cache import get_cache
    from myst_nb.core.read import create_nb_reader

    config = env.mystnb_config
    cache = get_cache(config.execution_cache_path)
    pending = []
    for docname in docnames:
        path = Path(env.doc2path(docname))
        if path.suffix not in (".md", ".ipynb") or any(
                PurePosixPath(path.as_posix()).match(p) for p in config.execution_excludepatterns):
            continue
        text = path.read_text(encoding="utf-8")
        reader = create_nb_reader(str(path), env.myst_config, config, text)
        if reader is None:
            continue                                       # plain Markdown, nothing to run
        notebook = reader.read(text)
        own = {key: value for key, value in notebook.metadata.get(config.metadata_key, {}).items()
               if key.startswith("execution")}
        if set(own) - {"execution_timeout"}:
            continue                                       # other execution settings of its own: myst-nb's
        try:
            cache.match_cache_notebook(notebook)
        except KeyError:
            pending.append((docname, path, notebook, reader.read_fmt,
                            own.get("execution_timeout", config.execution_timeout)))
    return cache, pending


def execute_in_parallel(app, env, docnames):
    config = env.mystnb_config
    if config.execution_mode != "cache" or config.execution_in_temp:
        return
    cache, pending = _to_execute(app, env, docnames)
    workers = min(len(pending), len(os.sched_getaffinity(0)))
    if workers < 2:
        return                                             # nothing to gain: myst-nb runs it
    from jupyter_cache.base import CacheBundleIn

    LOGGER.info(f"Executing {len(pending)} notebooks, {workers} at a time")
    with ProcessPoolExecutor(workers) as pool:
        futures = []
        for docname, path, notebook, _, timeout in pending:
            LOGGER.info("Executing notebook in parallel", location=docname)
            futures.append(pool.submit(_execute, notebook, str(path.parent),
                                       config.execution_allow_errors, timeout))
        for (docname, path, _, read_fmt, _), future in zip(pending, futures):
            executed, seconds, error = future.result()
            if error is not None:
                LOGGER.info("Execution failed; executed again when read", location=docname)
                continue
            record = cache.add_nb_to_project(str(path), read_data=read_fmt)
            cache.cache_notebook_bundle(CacheBundleIn(executed, record.uri, data={"execution_seconds": seconds}),
                                        check_validity=False, overwrite=True)
            LOGGER.info(f"Executed notebook in {seconds:.2f} seconds", location=docname)


def setup(app):
    app.connect("env-before-read-docs", execute_in_parallel)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
