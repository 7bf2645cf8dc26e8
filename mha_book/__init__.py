"""mha_book: what the course's pages need besides the maths (not shipped to students).

* :mod:`mha_book.plotting` — attention heatmaps (matplotlib);
* :mod:`mha_book.widgets` — the static head viewer's HTML, SVG and JSON;
* :mod:`mha_book.toy` — the chapters' toy task and the tiny model trained on it;
* :mod:`mha_book.kernels` — which of torch's operators ran (did torch take its fused fast path?).

The layer itself, its reference and its counts are in :mod:`mha_lib`.
"""
