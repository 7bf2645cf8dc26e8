"""What a check returns or raises: a :class:`Verdict`, or :class:`Fail` on the way to one.

Shared by the judge (:mod:`mha_checks.judge`) and the per-exercise checks (:mod:`mha_checks.checks`),
which import it rather than each other: no import circle.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    passed: bool
    message: str
    mistake: str | None = None


PASSED = Verdict(True, "", None)


class Fail(Exception):
    """Raised inside the judge with the verdict's message and mistake label."""

    def __init__(self, message: str, mistake: str):
        super().__init__(message)
        self.message, self.mistake = message, mistake


def sizes_note(sizes: dict) -> str:
    if sizes and len(set(sizes.values())) == len(sizes):
        return (" The sizes here are all different (" + ", ".join(f"{k}={v}" for k, v in sizes.items())
                + "): code that only works when some of them are equal fails on them.")
    return ""
