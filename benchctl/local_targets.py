"""``benchctl local up`` target declarations: what each local target may do (declared
limits) or what it is (facts), turned into the API's target registry (BENCH_TARGETS).

    --target-limits scratch=read_mibps=40,iops=5000
    --target-facts 'vol1={"kind": "anf", "service_level": "ultra", "quota_tib": 100}'
"""

from __future__ import annotations

import json
from typing import Any

from core.runs.guardrails import parse_targets


class TargetDeclarationError(ValueError):
    pass


def _split(value: str, flag: str) -> tuple[str, str]:
    name, sep, rest = value.partition("=")
    if not sep or not name or not rest:
        raise TargetDeclarationError(f"{flag} {value!r}: expected NAME=...")
    return name, rest


def _limits(text: str, flag: str, name: str) -> dict[str, float]:
    out = {}
    for pair in text.split(","):
        key, sep, number = pair.partition("=")
        try:
            if not sep:
                raise ValueError
            out[key.strip()] = float(number)
        except ValueError:
            raise TargetDeclarationError(
                f"{flag} {name}: {pair!r} is not KEY=NUMBER (read_mibps, write_mibps, "
                "total_mibps, iops)"
            ) from None
    return out


def local_registry(
    targets: dict[str, str], limits: list[str], facts: list[str], pool: str = "default"
) -> str:
    """BENCH_TARGETS for the local API: every ``--target`` in ``pool``, with what is declared
    of it, so that GET /api/targets and the bot's ``targets`` list them. Raises
    TargetDeclarationError naming the flag and the field."""
    entries: dict[str, dict[str, Any]] = {a: {"alias": a, "pool": pool} for a in targets}
    for value in limits:
        name, rest = _split(value, "--target-limits")
        if name not in entries:
            raise TargetDeclarationError(f"--target-limits {name}: no --target {name}=DIR")
        entries[name]["limits"] = _limits(rest, "--target-limits", name)
    for value in facts:
        name, rest = _split(value, "--target-facts")
        if name not in entries:
            raise TargetDeclarationError(f"--target-facts {name}: no --target {name}=DIR")
        try:
            entries[name]["facts"] = json.loads(rest)
        except ValueError as e:
            raise TargetDeclarationError(f"--target-facts {name}: not JSON ({e})") from None
    text = json.dumps(list(entries.values()))
    try:
        parse_targets(text)  # the API's own check, so a mistake stops here, named
    except ValueError as e:
        raise TargetDeclarationError(str(e)) from None
    return text
