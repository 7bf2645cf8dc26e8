"""Student-controlled text made safe for each place the grader writes it (one function per sink).

Anything a submission can influence (a folder name, an exception's name or message, a returned
object's type) may hold terminal escapes (ESC, OSC, CSI), carriage returns, bidi overrides, lone
surrogates, spreadsheet formulas, HTML, or megabytes of it. Each sink gets its own function:

* :func:`for_terminal`: one line of printable text (control and format characters shown as
  ``\\xNN``/``\\uNNNN`` escapes), capped;
* :func:`for_csv`: one cell of printable text, capped, never read as a formula by a spreadsheet;
* :func:`for_html`: the same, newlines kept, HTML-escaped (the pages add no markup processing of it).
"""
import html
import unicodedata

TERMINAL_CAP = 200      # characters of one student-controlled value on a terminal line
CSV_CAP = 2000          # characters of one CSV cell
HTML_CAP = 20000        # characters of one student-controlled text on a page
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def clause(text) -> str:
    """A sentence (an error's message, another sentence of ours) as a clause to go inside another sentence: its
    blank space and full stops at the end removed, so that it never reads "differs).; start" or ".."."""
    return str(text).strip().rstrip(".").rstrip()


def valid(text, cap: int) -> str:
    """``text`` as a str of valid Unicode (lone surrogates replaced), at most ``cap`` characters."""
    text = text if isinstance(text, str) else str(text)
    if len(text) > cap:
        text = text[:cap - 1] + "…"
    return text.encode("utf-8", "replace").decode("utf-8")


def _visible(ch: str) -> str:
    """A control or format character (Cc, Cf: ESC, CR, NUL, bidi overrides, zero-width marks) as an escape."""
    if unicodedata.category(ch) in {"Cc", "Cf", "Cs", "Zl", "Zp"}:
        code = ord(ch)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return ch


def printable(text, cap: int, keep: str = "") -> str:
    """Every control/format character but those in ``keep`` escaped, then capped (the escapes count)."""
    text = valid(text, cap)
    return valid("".join(ch if ch in keep else _visible(ch) for ch in text), cap)


def for_terminal(text, cap: int = TERMINAL_CAP) -> str:
    """Safe to print on a terminal: one line, no escape sequence, at most ``cap`` characters."""
    return printable(text, cap)


def for_csv(value, cap: int = CSV_CAP):
    """Safe as one CSV cell: numbers stay numbers; text is one printable line that a spreadsheet
    never takes for a formula (a leading = + - @ gets a ``'`` in front)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return value
    text = printable(value, cap)
    return "'" + text if text.startswith(FORMULA_START) else text


def for_html(text, cap: int = HTML_CAP) -> str:
    """Safe inside an HTML element or a quoted attribute: valid, capped, control and format characters
    (bidi overrides included) shown as escapes, newlines and tabs kept, HTML-escaped (quotes included)."""
    return html.escape(printable(text, cap, keep="\n\t"), quote=True)
