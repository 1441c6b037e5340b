"""Byte-size strings as fio writes them ("4k", "64m", "1g"), always base 1024.

fio's own parser accepts many more spellings (kb_base, "KiB", ranges). We accept a small,
unambiguous subset so that a request means the same thing on fio and DiskSpd.
"""

from __future__ import annotations

import re

SIZE_PATTERN = r"^[1-9][0-9]{0,12}[kKmMgGtT]?$"
_SIZE_RE = re.compile(SIZE_PATTERN)
_MULTIPLIER = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """Return the number of bytes in ``text``; raise ValueError if it is not a size."""
    if not _SIZE_RE.match(text):
        raise ValueError(f"{text!r} is not a size such as 4096, 4k, 64m or 1g")
    suffix = text[-1].lower() if text[-1].isalpha() else ""
    digits = text[:-1] if suffix else text
    return int(digits) * _MULTIPLIER[suffix]


def format_size(n: int) -> str:
    """The shortest exact spelling: 4096 -> '4k'."""
    for suffix in ("t", "g", "m", "k"):
        mult = _MULTIPLIER[suffix]
        if n >= mult and n % mult == 0:
            return f"{n // mult}{suffix}"
    return str(n)


def clients_text(n: int) -> str:
    """``1 client``, ``4 clients``: what people read in messages and tables."""
    return f"{n} client" if n == 1 else f"{n} clients"
