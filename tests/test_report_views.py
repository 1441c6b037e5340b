"""What a person sees (issue 26.3 and 26.4), in headless Chromium: a client sweep's curve,
histogram and clients' seconds, a two-field sweep's heatmaps, runs compared, a series'
regressions and the list pages.

Three short real runs for the module, on 2 agents: A and B, the same client sweep (1 then
2 clients, 2 s each), and C, an iodepth x numjobs grid on 1 client (2 s each). The series
report's history is written straight into the store (16 points of a known change): a real
one takes 16 runs."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser

from adapters.cosmos import CosmosStore
from benchctl import localstack
from benchctl.localstack import Stack
from core.analysis.series import infra_fingerprint
from core.latency import format_ns
from core.models.series import InfraFacts, StepPoint
from core.monitoring.monitor import Monitor
from reports.series_figures import metric_value
from tests.browser import Watched, benchctl, chromium, trace
from tests.conftest import _agent_ids, _pool_names, run_body, wait_state

SCIENTIFIC = re.compile(r"\de[+-]?\d")


# Its module fixture starts agents that run fio (tests/lanes.py cannot see them).
pytestmark = pytest.mark.fio


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def runs(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pool = next(_pool_names)
    scratch = tmp_path_factory.mktemp("views-scratch")
    procs = [
        localstack.start_agent(
            stack, f"{pool}-{next(_agent_ids)}", pool=pool, targets={"scratch": str(scratch)}
        )
        for _ in range(2)
    ]
    bodies = {
        "A": run_body(pool, runtime=2) | {"clients": [1, 2]},
        "B": run_body(pool, runtime=2) | {"clients": [1, 2]},
        # 2 s: a 1 s job can end before fio's first log line, and then has no timeline.
        "C": run_body(pool, runtime=2)
        | {
            "sweep": {
                "grid": [
                    {"field": "iodepth", "values": [1, 4]},
                    {"field": "numjobs", "values": [1, 2]},
                ]
            }
        },
    }
    try:
        with httpx.Client(base_url=stack.api_url, timeout=30) as api:
            out: dict[str, Any] = {"pool": pool}
            for name, body in bodies.items():  # one target: they run one after another
                out[name] = api.post("/api/runs", json=body).json()["id"]
            for name in bodies:
                run = wait_state(api, out[name], ("completed", "failed"), timeout=180)
                assert run["state"] == "completed", run["error"]
                out[f"{name}-run"] = run
                out[f"{name}-curves"] = api.get(f"/api/runs/{out[name]}/curves").json()
            return out
    finally:
        for p in procs:
            localstack.stop_proc(p, signal.SIGKILL, timeout=5)


def _painted(page: Watched, chart: str) -> dict[str, Any]:
    """The histogram's bars and its percentile lines and labels, in pixels."""
    found: dict[str, Any] = page.page.evaluate(
        """(id) => {
             const div = document.getElementById(id);
             const box = e => e.getBoundingClientRect();
             return {
               bars: [...div.querySelectorAll('.barlayer .point path')].map(p => box(p).width),
               lines: [...div.querySelectorAll('.shapelayer path')].map(
                 p => { const b = box(p); return b.left + b.width / 2; }),
               labels: [...div.querySelectorAll('.annotation')].map(
                 a => [a.textContent, box(a).left, box(a).right]),
             };
           }""",
        chart,
    )
    return found


def test_client_sweep_report_connects_its_curve_and_shows_bars_and_clients(
    stack: Stack, runs: dict[str, Any], browser: Browser
) -> None:
    run, curves = runs["A-run"], runs["A-curves"]
    page = Watched(browser.new_page(viewport={"width": 1280, "height": 900}))
    page.page.goto(f"{stack.api_url}/api/runs/{run['id']}/report")
    charts = page.charts()

    # A client sweep is one curve per percentile over the client counts, not lone dots.
    points = sorted(curves["latency"], key=lambda p: p["clients"])
    painted = page.lines("curve-latency")
    for level in ("p50", "p99", "p99.9"):
        drawn = trace(charts["curve-latency"], f"read {level}")
        assert drawn["x"] == [p["iops"] for p in points]
        assert drawn["y"] == [p[f"read_lat_{level}_ns"] / 1e6 for p in points]
        assert drawn["text"] == ["1 client", "2 clients"]
        assert len(painted[f"read {level}"]) == 2
    # Every bar of the 2-client window's total-latency histogram can be seen, and each
    # percentile's label sits on its line (a log axis places annotations in decades).
    agg = run["steps"][1]["aggregate"]
    bars = trace(charts["histogram-step1"], "read")
    shown = _painted(page, "histogram-step1")
    assert len(shown["bars"]) == len(bars["x"]) > 10
    assert min(shown["bars"]) >= 1.0, "a bar narrower than a pixel"
    labels = {text: (left, right) for text, left, right in shown["labels"]}
    for level, x in zip(("p50", "p99", "p99.9"), shown["lines"], strict=True):
        text = f"read {level} {format_ns(agg['read']['lat_ns'][level])}"
        _, right = labels[text]
        assert abs(right - x) <= 4, (text, right, x)  # its right edge on the dashed line
    # Each client's seconds: two rows at about the clients' mean, labelled with the share.
    heat = trace(charts["clients-step1"], "clients")
    assert len(heat["z"]) == 2 and heat["y"][0].startswith("client 0 (")
    live = [v for row in heat["z"] for v in row if v is not None]
    assert live and all(60 <= v <= 140 for v in live)
    assert heat["text"][0][1] == f"{heat['z'][0][1]:.0f}%"
    assert page.errors == []
    page.shot("run-report-client-sweep.png", selector="#curve-latency", docs=True)
    page.shot("run-report-clients.png", selector="#clients-step1", docs=True)


def test_two_field_sweep_is_drawn_as_heatmaps(
    stack: Stack, runs: dict[str, Any], browser: Browser
) -> None:
    """iodepth x numjobs as fio-plot draws it: one cell per pair, with its figure."""
    run = runs["C-run"]
    assert [s["point"] for s in run["steps"]] == [
        "iodepth=1,numjobs=1",
        "iodepth=4,numjobs=1",
        "iodepth=1,numjobs=2",
        "iodepth=4,numjobs=2",
    ]
    page = Watched(browser.new_page(viewport={"width": 1280, "height": 900}))
    page.page.goto(f"{stack.api_url}/api/runs/{run['id']}/report")
    charts = page.charts()
    assert "curve-latency" not in charts
    iops, p99 = trace(charts["grid-iops"], "IOPS (all clients)"), charts["grid-p99"][0]
    assert iops["x"] == ["1", "4"] and iops["y"] == ["1", "2"]
    aggs = [s["aggregate"] for s in run["steps"]]
    cell = [a["read"]["iops"] for a in aggs]
    assert iops["z"] == [cell[:2], cell[2:]]  # rows: numjobs 1, 2; columns: iodepth 1, 4
    wanted = [format_ns(a["read"]["lat_ns"]["p99"]) for a in aggs]
    assert p99["text"] == [wanted[:2], wanted[2:]]
    painted = page.page.evaluate("document.getElementById('grid-p99').textContent")
    assert all(w in painted for w in wanted), painted  # each cell says its p99
    assert page.errors == []
    page.shot("run-report-grid.png", selector="#grid-iops", docs=True)


def test_runs_compared_overlaid_with_deltas_against_the_noise(
    stack: Stack, runs: dict[str, Any], browser: Browser, tmp_path: Path
) -> None:
    a, b, c = runs["A"], runs["B"], runs["C"]
    assert benchctl(stack, "report", "--compare", a).returncode == 2
    out = tmp_path / "cmp.html"
    r = benchctl(stack, "report", "--compare", a, b, c, "-o", str(out))
    assert r.returncode == 0, r.stderr
    with httpx.Client(base_url=stack.api_url, timeout=60) as api:
        assert api.get("/api/compare/report", params={"run": [a]}).status_code == 400
        judged = {x: api.get("/api/compare", params={"a": a, "b": x}).json() for x in (b, c)}
    page = Watched(browser.new_page(viewport={"width": 1280, "height": 900}))
    page.page.goto(out.as_uri())
    charts = page.charts()
    rows = page.page.eval_on_selector_all(
        "#deltas tr[data-metric]",
        "rs => rs.map(r => [r.dataset.metric, [...r.cells].map(t => t.textContent)])",
    )
    assert rows, "no deltas"
    for metric, cells in rows:
        want = [next(x for x in judged[other]["rows"] if x["metric"] == metric) for other in (b, c)]
        assert cells[1] == metric_value(want[0]["a"], metric)
        for i, w in enumerate(want):
            value, delta, verdict = cells[3 + 3 * i : 6 + 3 * i]
            assert value == metric_value(w["b"], metric)
            assert delta == f"{w['delta_pct']:+.1f}%"
            assert verdict == w["verdict"]
        assert not SCIENTIFIC.search(" ".join(cells))
    assert [m for m, _ in rows][:3] == ["read.iops", "read.bw_bytes", "read.lat.p50"]
    # Overlaid: each run's seconds at about its IOPS, its histogram (100 % of its I/Os),
    # its curve.
    for letter in "ABC":
        run = runs[f"{letter}-run"]
        seconds = trace(charts["compare-seconds"], f"{letter} read")
        assert len(seconds["x"]) >= 1
        mean = sum(seconds["y"]) / len(seconds["y"])
        assert mean == pytest.approx(run["aggregate"]["read"]["iops"], rel=0.25)
        hist = trace(charts["compare-histograms"], f"{letter} read")
        assert sum(hist["y"]) == pytest.approx(100.0)
    curve = trace(charts["compare-curves"], "A read p99")
    by_clients = sorted(runs["A-curves"]["latency"], key=lambda p: p["clients"])
    assert curve["x"] == [p["iops"] for p in by_clients]
    assert "differs from A" in page.page.inner_text("body")  # C is another workload
    assert page.errors == [] and all(u.startswith("file://") for u in page.requests)
    page.shot("compare-report.png", docs=True)
    # One self-contained file: plotly.js inlined once, nothing loaded from elsewhere (the
    # UI serves the same page at /ui/compare: ticked on /ui/runs in the last test).
    html = out.read_text()
    assert html.count("Plotly.newPlot") == 1 and "<script src" not in html


def _points(key: str, n: int = 16) -> list[StepPoint]:
    """A series whose total p99 latency rises by half and IOPS fall by a fifth from the
    9th run on (a known change), with a little noise."""
    facts = InfraFacts(hosts=[("Standard_D4s_v5", "westeurope")], mounts=[])
    out = []
    for i in range(n):
        wobble = 1 + 0.01 * ((i * 7) % 5 - 2)
        after = i >= n // 2
        metrics = {
            "read.iops": (40_000.0 if after else 50_000.0) * wobble,
            "read.bw_bytes": (40_000.0 if after else 50_000.0) * 4096 * wobble,
            "read.lat.p50": 81_408.0 * wobble,
            "read.lat.p99": (408_576.0 if after else 272_384.0) * wobble,
            "read.lat.p99.9": 2_899_968.0 * wobble,
        }
        out.append(
            StepPoint.model_validate(
                {
                    "id": f"{key}.r-{i:032d}.s0",
                    "series_key": key,
                    "run_id": f"r-{i:032d}",
                    "step": 0,
                    "target": "scratch",
                    "time_ms": 1_790_000_000_000 + i * 3_600_000,
                    "infra": infra_fingerprint(facts),
                    "infra_facts": facts,
                    "metrics": metrics,
                    "clients": 2,
                    "engine": "fio",
                    "workload": {"rw": "randread", "bs": "4k", "numjobs": 1, "iodepth": 4},
                    "tags": {},
                    "gate": {},
                }
            )
        )
    return out


def test_series_report_and_lists_read_as_people_name_things(
    stack: Stack, store: CosmosStore, runs: dict[str, Any], browser: Browser
) -> None:
    key = "f" * 15 + "1"
    for p in _points(key):
        store.series.create_point(p)
    found = Monitor(store).detect(key, "scratch")
    assert {r.metric for r in found} >= {"read.lat.p99", "read.iops"}
    page = Watched(browser.new_page(viewport={"width": 1280, "height": 900}))
    page.page.goto(f"{stack.api_url}/ui/series/{key}")
    charts = page.charts()
    # One chart per latency kind, in the unit its largest figure needs (p99.9: 2.9 ms).
    assert trace(charts["series-read.lat"], "read.lat.p99")["y"][0] == pytest.approx(0.2724, 0.03)
    title = "document.getElementById('series-read.lat').querySelector('.gtitle').textContent"
    assert page.page.evaluate(title) == "read total latency, ms"
    assert page.page.inner_text("#series-name") == "scratch · randread 4k 1x4 · 2 clients"
    # The regressions table fits the page and reads in µs and ms, never 2.724e+05 ± 0.
    width = page.page.evaluate("document.documentElement.clientWidth")
    assert page.page.evaluate("document.documentElement.scrollWidth") <= width
    table = "document.getElementById('regressions').getBoundingClientRect().right"
    assert page.page.evaluate(table) <= width
    text = page.page.inner_text("#regressions")
    assert not SCIENTIFIC.search(text), text
    row = page.page.inner_text("#regressions tr:has-text('read total p99 latency')")
    assert "µs" in row and "+" in row
    page.shot("series-report.png", docs=True)
    page.shot("series-regressions.png", selector="#regressions", docs=True)

    # /ui/series names each series; /ui/runs shows each run's figures.
    page.page.goto(f"{stack.api_url}/ui/series")
    link = page.page.inner_text(f"#series tr[data-key='{key}'] a")
    assert link == "scratch · randread 4k 1x4 · 2 clients"
    page.page.goto(f"{stack.api_url}/ui/runs?target=scratch&limit=200")
    row = page.page.inner_text(f"#runs tr[data-run='{runs['A']}']")
    last = runs["A-run"]["aggregate"]["read"]
    assert f"{last['iops']:,.0f}" in row and f"total {format_ns(last['lat_ns']['p99'])}" in row
    page.shot("ui-runs.png", docs=True, full_page=False)
    # Tick two runs and compare them.
    page.page.check(f"#runs tr[data-run='{runs['A']}'] input[name=run]")
    page.page.check(f"#runs tr[data-run='{runs['B']}'] input[name=run]")
    page.page.click("text=Compare ticked runs")
    page.page.wait_for_url("**/ui/compare?**")
    assert page.page.inner_text("h1") == "2 runs compared"
    assert runs["B"] in page.page.inner_text("#compared")
    assert page.errors == []
