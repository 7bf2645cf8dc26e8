"""Every text file of the built site compressed once, at build time, beside itself.

``x.html`` gets ``x.html.gz`` (gzip, level 9) and ``x.html.br`` (Brotli, quality 11), as static
hosts serve them (nginx's ``gzip_static``/``brotli_static``, Netlify, GitHub Pages); ``make serve``
(static_server.py) sends the one the browser accepts. A variant that is not smaller than its file
is not written. Fonts, images and archives are compressed already and are left alone.

A rebuild compresses only the files that changed (a variant older than its file is redone) and
removes the variants whose file is gone. The output is the same for the same input (gzip's
header carries no time and no name).
"""
from __future__ import annotations

import gzip
from pathlib import Path

import brotli

#: Text formats worth compressing (by suffix). Source maps (.map, 2 MB) are read by developer
#: tools only, so they are left as they are.
TEXT = {".html", ".css", ".js", ".json", ".svg", ".txt", ".xml", ".ipynb", ".md"}
VARIANTS = {".gz": lambda data: gzip.compress(data, compresslevel=9, mtime=0),
            ".br": lambda data: brotli.compress(data, quality=11)}


def compress_site(site: Path) -> int:
    """Write the .gz and .br of every text file under ``site`` that lacks a current one; returns
    how many files were compressed."""
    done = 0
    for path in sorted(p for p in site.rglob("*") if p.is_file()):
        if path.suffix in VARIANTS:
            original = path.with_suffix("")
            if original.suffix in TEXT and not original.is_file():      # its file is gone
                path.unlink()
            continue
        if path.suffix not in TEXT:
            continue
        stale = [(suffix, path.with_name(path.name + suffix)) for suffix in VARIANTS]
        stale = [(s, v) for s, v in stale if not v.is_file() or v.stat().st_mtime < path.stat().st_mtime]
        if not stale:
            continue
        data = path.read_bytes()
        for suffix, variant in stale:
            packed = VARIANTS[suffix](data)
            if len(packed) < len(data):
                variant.write_bytes(packed)
            else:
                variant.unlink(missing_ok=True)
        done += 1
    return done
