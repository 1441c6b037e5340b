"""Offline aggregation of fio outputs (pure): what ``benchctl aggregate`` reads.

Accepts, per file: a DiskSpd XML output (``-Rxml``; one client), a single fio run's JSON
(all its jobs are one client), or one fio client/server JSON (``client_stats``: one client
per host:port, fio's own "All clients" entry ignored, since it carries no histogram).
Per-second logs, when given (``benchctl aggregate --logs``: the ``*_iops.*.log``,
``*_bw.*.log`` and ``*_clat_hist.*.log`` files beside each output), give each client a
timeline, hence the common window and its percentiles, exactly as the service computes
them; without them whole-run figures are summed and the result says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.analysis.aggregate import aggregate
from core.engines.diskspd_xml import sample_from_xml
from core.engines.fio_logs import LogError, final_output, timeline_from_logs
from core.engines.fio_output import ALL_CLIENTS, directions_from_fio, has_bins
from core.engines.fio_status import StatusOutput, read_output, with_total_latency
from core.models import StepFigures
from core.timeline import ClientSample


@dataclass(frozen=True)
class ClientLogs:
    """The texts of one client's fio logs, one per job."""

    iops: Sequence[str]
    bw: Sequence[str]
    hist: Sequence[str] = ()


class InputError(ValueError):
    """An input file is not a fio JSON output we can read."""


def parse_fio_text(text: str, name: str) -> StatusOutput:
    """fio may print notes before its JSON (client/server mode does), and with
    ``--status-interval`` a status output per interval before the final one (the agent's
    runs do: total latency per interval, core.engines.fio_status)."""
    start = text.find("{")
    if start < 0:
        raise InputError(f"{name}: no JSON object in the file")
    output = read_output(text)
    if output.final is None:
        try:
            json.loads(text[start:])
        except json.JSONDecodeError as e:
            raise InputError(f"{name}: not valid JSON ({e.msg} at line {e.lineno})") from None
        raise InputError(f"{name}: not a fio JSON output")
    doc = output.final
    if not ("jobs" in doc or "client_stats" in doc):
        raise InputError(f"{name}: not a fio JSON output (no 'jobs' or 'client_stats')")
    return output


def samples_from_doc(
    doc: Mapping[str, Any],
    *,
    label: str,
    first_client: int = 0,
    logs: ClientLogs | None = None,
    status: StatusOutput | None = None,
) -> list[ClientSample]:
    if "client_stats" in doc:
        groups: dict[str, list[Mapping[str, Any]]] = {}
        for entry in doc["client_stats"]:
            if entry.get("jobname") == ALL_CLIENTS:
                continue
            key = f"{entry.get('hostname', '?')}:{entry.get('port', '?')}"
            groups.setdefault(key, []).append(entry)
        return [
            ClientSample(
                client=first_client + i,
                dirs=directions_from_fio({"jobs": entries}),
                agent_id=host,
                has_bins=has_bins(entries),
            )
            for i, (host, entries) in enumerate(sorted(groups.items()))
        ]
    try:
        timeline = (
            timeline_from_logs(logs.iops, logs.bw, logs.hist, final=final_output(doc))
            if logs
            else None
        )
    except LogError as e:
        raise InputError(f"{label}: {e}") from None
    if status is not None:
        timeline = with_total_latency(timeline, status)
    return [
        ClientSample(
            client=first_client,
            dirs=directions_from_fio(doc),
            timeline=timeline,
            agent_id=label,
            has_bins=has_bins(doc.get("jobs", [])),
        )
    ]


def aggregate_files(
    inputs: Sequence[tuple[str, str, ClientLogs | None]],
) -> StepFigures:
    """``inputs``: (name, file text, optional logs) per file."""
    samples: list[ClientSample] = []
    for name, text, logs in inputs:
        if text.lstrip().startswith("<"):  # DiskSpd -Rxml: no histogram, approximate pcts
            try:
                samples.append(sample_from_xml(text, client=len(samples), label=name))
            except (ValueError, KeyError) as e:
                raise InputError(f"{name}: not a DiskSpd XML output ({e})") from None
            continue
        output = parse_fio_text(text, name)
        assert output.final is not None
        samples += samples_from_doc(
            output.final, label=name, first_client=len(samples), logs=logs, status=output
        )
    if not samples:
        raise InputError("no client found in the inputs")
    return aggregate(samples)
