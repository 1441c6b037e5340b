"""The bench's call counting (adapters.counting, BENCH_COUNT_CALLS) costs the counted process
one write per call: the file is opened once, not for every call (3-4 % of an API instance's
samples under a 100-client bench went to opening and closing it)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from adapters import counting


@pytest.mark.unit
def test_calls_are_appended_to_a_file_opened_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "calls.log"
    monkeypatch.setenv(counting.SETTING, str(calls))
    opened: list[str] = []
    real_open = os.open

    def counted(path: Any, *a: Any, **k: Any) -> int:
        opened.append(str(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr(os, "open", counted)
    with ThreadPoolExecutor(16) as pool:
        list(
            pool.map(
                lambda i: counting.record("cosmos", "read" if i % 2 else "replace"), range(400)
            )
        )
    lines = calls.read_text().splitlines()
    assert len(lines) == 400
    assert sorted(" ".join(line.split()[2:]) for line in lines) == (
        ["cosmos read"] * 200 + ["cosmos replace"] * 200
    )
    assert opened.count(str(calls)) == 1


@pytest.mark.unit
def test_the_calls_read_back_per_client_within_a_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the benches report (bench/scale.py): the lines recorded, read back, counted per
    client for the calls inside a window only."""
    calls = tmp_path / "calls.log"
    monkeypatch.setenv(counting.SETTING, str(calls))
    for service, op in [("cosmos", "read")] * 6 + [("queue", "send")] * 2 + [("api", "x")] * 4:
        counting.record(service, op)
    read = counting.read_calls(calls)
    assert len(read) == 12 and {pid for _, pid, _, _ in read} == {os.getpid()}
    window = (read[0][0], read[-1][0])
    figures = counting.per_client(read, window, n=2)
    assert figures["db_calls"]["read"] == 3.0 and figures["db_calls"]["create"] == 0.0
    assert figures["queue"]["send"] == 1.0 and figures["http_requests"] == 2.0
    assert counting.per_client(read, (0.0, 1.0), n=2)["db_calls"]["read"] == 0.0
    assert counting.read_calls(tmp_path / "none.log") == []
