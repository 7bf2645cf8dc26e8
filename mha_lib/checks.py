"""Input checks shared by the NumPy reference and the PyTorch module.

Every check raises ``ValueError`` with one sentence saying what was expected and what was
given, so a learner reads the mistake, not a stack of broadcasting errors.
"""


def fail(what: str, expected: str, given) -> None:
    """Raise the one error format used across mha_lib."""
    raise ValueError(f"{what}: expected {expected}, got {given}.")


def check_heads(embed_dim: int, num_heads: int) -> int:
    """Return the head width d_k = embed_dim // num_heads after checking it divides evenly."""
    if not isinstance(num_heads, int) or num_heads <= 0:
        fail("num_heads", "a positive integer", repr(num_heads))
    if not isinstance(embed_dim, int) or embed_dim <= 0:
        fail("embed_dim", "a positive integer", repr(embed_dim))
    if embed_dim % num_heads:
        fail("embed_dim", f"a multiple of num_heads={num_heads} so every head gets the same width",
             f"embed_dim={embed_dim} (remainder {embed_dim % num_heads})")
    return embed_dim // num_heads


def check_rank(name: str, shape: tuple, ranks: tuple[int, ...], layout: str) -> None:
    """Check that a tensor has one of the allowed numbers of axes."""
    if len(shape) not in ranks:
        allowed = " or ".join(f"{r}-D" for r in ranks)
        fail(name, f"a {allowed} tensor shaped {layout}", f"a {len(shape)}-D tensor of shape {tuple(shape)}")


def check_width(name: str, shape: tuple, width: int, what: str) -> None:
    """Check the last axis (the feature width) of a tensor."""
    if shape[-1] != width:
        fail(name, f"last dimension {width} ({what})", f"shape {tuple(shape)}")


def check_same(name: str, given, expected, what: str) -> None:
    """Check that two sizes that must agree do agree."""
    if given != expected:
        fail(name, f"{what} = {expected}", given)


def check_dropout(p) -> None:
    if not 0.0 <= p < 1.0:
        fail("dropout", "a probability in [0, 1)", repr(p))


def check_kv_heads(num_heads: int, num_kv_heads: int) -> int:
    """Return the number of query heads per key/value head, h / g, after checking g divides h."""
    if not isinstance(num_kv_heads, int) or num_kv_heads <= 0:
        fail("num_kv_heads", "a positive integer", repr(num_kv_heads))
    if num_heads % num_kv_heads:
        fail("num_kv_heads", f"a divisor of num_heads={num_heads} (each key/value head serves the same "
             "number of query heads)", num_kv_heads)
    return num_heads // num_kv_heads
