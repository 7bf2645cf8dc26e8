"""``make serve``: the built site on loopback, sent compressed as a production static host sends it.

    python site/static_server.py [--port 8000] [--directory _build/html]

A request for ``x.html`` from a browser that accepts Brotli gets ``x.html.br`` (written at build
time by precompress.py) with ``Content-Encoding: br``; one that accepts gzip gets ``x.html.gz``;
any other gets ``x.html``. A variant older than its file (the file was changed after the build) is
not sent. The type is always the file's own (``text/html``), and every file that
has a compressed variant is sent with ``Vary: Accept-Encoding``, so that a cache keeps the variants
apart. Nothing is compressed per request. It listens on 127.0.0.1 only.

tests/test_site.py serves the site with :class:`Handler` too: the browser tests read the pages as
they arrive compressed.
"""
from __future__ import annotations

import argparse
import email.utils
import functools
import http.server
import os
from pathlib import Path

#: Content-Encoding -> the suffix of its file, in the order they are preferred.
ENCODINGS = {"br": ".br", "gzip": ".gz"}


def accepted(header: str | None) -> set[str]:
    """The codings an Accept-Encoding header accepts (``q=0`` refuses one; ``*`` is any other)."""
    codings, refused, anything = set(), set(), False
    for part in (header or "").split(","):
        name, _, params = part.strip().partition(";")
        name = name.strip().lower()
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if not name:
            continue
        if name == "*":
            anything = q > 0
        elif q > 0:
            codings.add(name)
        else:
            refused.add(name)
    return {c for c in ENCODINGS if c in codings or (anything and c not in refused)}


class Handler(http.server.SimpleHTTPRequestHandler):
    """SimpleHTTPRequestHandler that sends a file's pre-compressed variant when it is accepted."""

    def _unchanged_since(self, path: Path) -> bool:
        """The browser's copy is current (If-Modified-Since, as SimpleHTTPRequestHandler does)."""
        since = self.headers.get("If-Modified-Since")
        if not since or "If-None-Match" in self.headers:
            return False
        try:
            return int(path.stat().st_mtime) <= email.utils.parsedate_to_datetime(since).timestamp()
        except (TypeError, ValueError, IndexError, OverflowError):
            return False

    def send_head(self):
        path = Path(self.translate_path(self.path))
        if path.is_dir() and self.path.split("?", 1)[0].endswith("/"):
            path = path / "index.html"
        if not path.is_file():
            return super().send_head()    # a folder's redirect, a 404
        variants = {c: path.with_name(path.name + s) for c, s in ENCODINGS.items()}
        variants = {c: v for c, v in variants.items()     # one older than its file is stale: not sent
                    if v.is_file() and v.stat().st_mtime >= path.stat().st_mtime}
        coding = next((c for c in variants if c in accepted(self.headers.get("Accept-Encoding"))), None)
        if self._unchanged_since(path):
            self.send_response(304)
            if variants:
                self.send_header("Vary", "Accept-Encoding")
            self.end_headers()
            return None
        try:
            body = open(variants[coding] if coding else path, "rb")
        except OSError:
            self.send_error(404, "File not found")
            return None
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Length", str(os.fstat(body.fileno()).st_size))
        self.send_header("Last-Modified", email.utils.formatdate(path.stat().st_mtime, usegmt=True))
        if variants:
            self.send_header("Vary", "Accept-Encoding")
        if coding:
            self.send_header("Content-Encoding", coding)
        self.end_headers()
        return body


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--directory", default="_build/html", help="the built site (default: %(default)s)")
    args = parser.parse_args(argv)
    if not Path(args.directory, "index.html").is_file():
        parser.error(f"{args.directory}/index.html does not exist: build the site first (make book)")
    handler = functools.partial(Handler, directory=args.directory)
    with http.server.ThreadingHTTPServer(("127.0.0.1", args.port), handler) as httpd:
        print(f"Serving {args.directory} on http://127.0.0.1:{httpd.server_address[1]}/ (ctrl-C stops)")
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
