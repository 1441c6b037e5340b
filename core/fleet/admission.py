"""Whether a pool can serve a run at all (pure), decided at intake before anything is
written: the rule of the docs "Agents and pools".

- The agents judged are the pool's live ones; when none is live (an elastic pool at zero,
  agents restarting) those it has known (a scale set brings back the same image). A pool
  the service has never heard from is not judged on mounts or engines: nothing is known
  yet (the target registry, BENCH_TARGETS, still applies).
- Every target must be mounted, and usable, on at least one judged agent ("no agent in
  pool default mounts nosuch; agents mount: scratch"); the engine must be one a judged
  agent runs.
- The clients asked for at once must fit what the pool can ever provide: its declared
  size (``size``, or ``max`` for an elastic pool), otherwise the live agents that can run
  this run (mount every target, run the engine). A pool with neither is not judged.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.errors import FieldError
from core.fleet.pools import PoolConfig
from core.models.agents import AgentRecord


def _target_field(targets: Sequence[str], index: int, single: bool) -> str:
    return "target" if single else f"targets.{index}"


def _unusable(judged: Sequence[AgentRecord], target: str) -> str:
    """Why the agents that have ``target`` cannot use it, if they said (the first three)."""
    unusable = sorted(
        f"{r.id}: {m.problem}"
        for r in judged
        for m in r.mounts
        if m.alias == target and not m.usable and m.problem
    )
    return f" ({'; '.join(unusable[:3])})" if unusable else ""


def _judged_errors(
    pool: str,
    targets: Sequence[str],
    single_target: bool,
    engine: str,
    judged: Sequence[AgentRecord],
    where: str,
) -> list[FieldError]:
    """The targets no judged agent mounts (usably) and an engine none runs."""
    errors: list[FieldError] = []
    mounted = set().union(*(r.usable_mounts() for r in judged))
    shown = ", ".join(sorted(mounted)) or "nothing usable"
    for i, target in enumerate(targets):
        if target not in mounted:
            why = _unusable(judged, target)
            errors.append(
                FieldError(
                    _target_field(targets, i, single_target),
                    f"no {where} in pool {pool} mounts {target}{why}; agents mount: {shown}",
                )
            )
    engines = set().union(*(set(r.engines) for r in judged))
    if engine not in engines:
        errors.append(
            FieldError(
                "engine",
                f"no {where} in pool {pool} runs {engine}; agents run: "
                + (", ".join(sorted(engines)) or "nothing"),
            )
        )
    return errors


def _declared_error(
    pool: str, clients: int, config: PoolConfig, declared: int
) -> FieldError | None:
    if clients <= declared:
        return None
    kind = "grows to at most" if config.elastic else "has"
    return FieldError(
        "clients", f"{clients} clients at once, but pool {pool} {kind} {declared} agents"
    )


def _live_error(
    pool: str, targets: Sequence[str], engine: str, clients: int, live: Sequence[AgentRecord]
) -> FieldError | None:
    able = [r for r in live if set(targets) <= r.usable_mounts() and engine in r.engines]
    if clients <= len(able):
        return None
    return FieldError(
        "clients",
        f"{clients} clients at once, but pool {pool} has {len(able)} live agents "
        f"that can run this ({len(live)} live in all); declare its size in "
        "BENCH_POOLS if more are coming",
    )


def fleet_errors(
    *,
    pool: str,
    targets: Sequence[str],
    single_target: bool,
    engine: str,
    clients: int,
    config: PoolConfig | None,
    records: Sequence[AgentRecord],
    now_ms: int,
) -> list[FieldError]:
    """What the pool cannot serve of this run, each naming the request's field."""
    mine = [r for r in records if r.pool == pool]
    live = [r for r in mine if r.live(now_ms)]
    judged = live or mine
    errors: list[FieldError] = []
    if judged:
        where = "agent" if live else "agent (none is live; as last seen)"
        errors = _judged_errors(pool, targets, single_target, engine, judged, where)
    declared = config.declared_size if config else None
    size_error = None
    if config is not None and declared is not None:
        size_error = _declared_error(pool, clients, config, declared)
    elif live and not errors:
        size_error = _live_error(pool, targets, engine, clients, live)
    return errors if size_error is None else [*errors, size_error]
