"""Reports, the web UI, the exports and the local Swagger UI on a real run (issue 16),
looked at in headless Chromium (Debian's /usr/bin/chromium, driven by Playwright).

One real run for the module: 2 agents, a client sweep 1 -> 2 crossed with a rate sweep
(unthrottled, then capped at 50 % of it) of short fio steps, so every chart (per-second
timelines, the latency-versus-IOPS and scale-out curves, the histogram, share and skew,
limits, host counters) has real data. Screenshots go to .local/screenshots/.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from benchctl import localstack
from benchctl.localstack import Stack
from core.engines.fio_output import percentile_from_bins
from reports.page import plotly_js
from tests.conftest import TEST_TARGETS, _agent_ids, _pool_names, run_body, wait_state

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / ".local" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium tries to reach Google (refused here).
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
UI_KEY = "ui-reader-key-0123456789ab"


@pytest.fixture(scope="module")
def sweep(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A completed run of four steps (1 client: max, 50 %; 2 clients: max, 50 %), its
    curves and its results."""
    pool = next(_pool_names)
    scratch = tmp_path_factory.mktemp("reports-scratch")
    procs = [
        localstack.start_agent(
            stack, f"{pool}-{next(_agent_ids)}", pool=pool, targets={"scratch": str(scratch)}
        )
        for _ in range(2)
    ]
    try:
        with httpx.Client(base_url=stack.api_url, timeout=30) as api:
            body = run_body(pool, runtime=3)
            body.update(clients=[1, 2], sweep={"rate_pct": [50]}, tags={"suite": "reports"})
            run_id = api.post("/api/runs", json=body).json()["id"]
            run = wait_state(api, run_id, ("completed", "failed"), timeout=120)
            assert run["state"] == "completed", run["error"]
            curves = api.get(f"/api/runs/{run_id}/curves").json()
            results = {
                i["id"]: api.get(f"/api/runs/{run_id}/results/{i['id']}").json()
                for i in run["items"]
            }
            return {"run": run, "curves": curves, "results": results, "pool": pool}
    finally:
        for p in procs:
            localstack.stop_proc(p, signal.SIGKILL, timeout=5)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # Playwright gives each launch a fresh, temporary user-data-dir.
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield b
        b.close()


class Watched:
    """A page with every console error, page error and request it made recorded."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.errors: list[str] = []
        self.requests: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("request", lambda r: self.requests.append(r.url))
        page.on(
            "response",
            lambda r: self.errors.append(f"{r.status} {r.url}") if r.status >= 400 else None,
        )

    def charts(self) -> dict[str, list[dict[str, Any]]]:
        """Every chart's traces as plotly drew them (the div's gd.data)."""
        self.page.wait_for_function(
            "[...document.querySelectorAll('div.chart')].every(d => d.querySelector('.main-svg'))"
        )
        charts: dict[str, list[dict[str, Any]]] = self.page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll('div.chart')].map(d =>
                 [d.id, d.data.map(t => ({name: t.name, type: t.type || 'scatter',
                   x: Array.from(t.x || []), y: Array.from(t.y || [])}))]))"""
        )
        return charts

    def shot(self, name: str, full_page: bool = True) -> Path:
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / name
        self.page.screenshot(path=str(path), full_page=full_page)
        return path


def benchctl(stack: Stack, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchctl", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "BENCH_API_URL": stack.api_url, "BENCH_API_KEY": ""},
        **kw,
    )


def _trace(traces: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(t for t in traces if t["name"] == name)


def test_run_report_is_one_file_with_the_apis_numbers_drawn_in_chromium(
    stack: Stack, sweep: dict[str, Any], browser: Browser, tmp_path: Path
) -> None:
    run, curves, results = sweep["run"], sweep["curves"], sweep["results"]
    out = tmp_path / "run.html"
    r = benchctl(stack, "report", run["id"], "-o", str(out))
    assert r.returncode == 0, r.stderr
    with httpx.Client(base_url=stack.api_url, timeout=60) as api:
        served = api.get(f"/api/runs/{run['id']}/report")
    assert served.status_code == 200 and served.headers["content-type"].startswith("text/html")
    html = out.read_text()
    # plotly.js inlined once; nothing loaded from elsewhere (the browser's log checks it too)
    assert html.count("Plotly.newPlot") == 1 and html.count(plotly_js()[:200]) == 1
    assert "<script src" not in html and '<link rel="stylesheet' not in html

    page = Watched(browser.new_page(viewport={"width": 1280, "height": 900}))
    page.page.goto(out.as_uri())
    charts = page.charts()

    # The curves: one point per step, at the API's figures.
    scale = charts["curve-scaleout"]
    for label in ("max", "rate=50%"):
        mine = [p for p in curves["scaleout"] if p["point"] == label]
        assert _trace(scale, label)["x"] == [1, 2]
        assert _trace(scale, label)["y"] == [p["iops"] for p in mine]
        assert _trace(scale, f"{label}: linear")["y"] == [p["linear_iops"] for p in mine]
    lat = charts["curve-latency"]
    assert len(curves["latency"]) == 4
    for n, label in ((1, "1 client"), (2, "2 clients")):
        mine = sorted((p for p in curves["latency"] if p["clients"] == n), key=lambda p: p["iops"])
        p99 = _trace(lat, f"read p99 ({label})")
        assert p99["x"] == [p["iops"] for p in mine]
        assert p99["y"] == [p["read_p99_ns"] / 1e6 for p in mine]
        p50 = _trace(lat, f"read p50 ({label})")
        assert p50["y"] == [p["read_p50_ns"] / 1e6 for p in mine]
        # A known load: the 50 % step ran at half the unthrottled IOPS (fio's rate cap).
        capped, unthrottled = p99["x"]
        assert capped == pytest.approx(unthrottled / 2, rel=0.1)

    for step in run["steps"]:
        n, agg = step["step"], step["aggregate"]
        items = [i for i in run["items"] if i["step"] == n]
        iops = charts[f"timeline-iops-step{n}"]
        for item in items:
            series = results[item["id"]]["series"]["read"]
            drawn = _trace(iops, f"client {item['client']} ({item['agent_id']}) read")
            assert len(drawn["x"]) == len(series) >= 2  # one point per second
            assert drawn["y"] == [p["iops"] for p in series]
        total = _trace(iops, "all clients read")
        assert len(total["x"]) >= max(len(results[i["id"]]["series"]["read"]) for i in items)
        # The drawn histogram is the one the aggregate's percentiles come from: recomputed
        # from the bars as drawn, they are the API's. (fio's histogram log of a short run
        # holds fewer I/Os than its IOPS log: only whole log intervals are written.)
        bars = _trace(charts[f"histogram-step{n}"], "read")
        drawn_hist = {round(x * 1e6): y for x, y in zip(bars["x"], bars["y"], strict=True)}
        for name, pct in (("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9)):
            assert percentile_from_bins(drawn_hist, pct) == agg["read"]["clat_ns"][name]
        assert 0 < sum(bars["y"]) <= agg["read"]["iops"] * agg["window"]["seconds"] * 1.01
        share = _trace(charts[f"share-step{n}"], "share %")
        assert share["y"] == pytest.approx([c["share"] * 100 for c in agg["per_client"]])
        skew = _trace(charts[f"share-step{n}"], "start skew ms")
        assert skew["y"] == [c["start_skew_ms"] for c in agg["per_client"]]
        limits = [c for c in agg["ceilings"] if c.get("utilisation") is not None]
        drawn_limits = _trace(charts[f"ceilings-step{n}"], "utilisation %")
        assert drawn_limits["x"] == pytest.approx([c["utilisation"] * 100 for c in limits])
        assert f"counters-step{n}" in charts  # the agents sampled the host

    # The headline table holds the API's figures, formatted as the CLI formats them.
    cells = page.page.evaluate(
        """() => [...document.querySelectorAll('#headline tr[data-step]')].map(r =>
             [r.dataset.step, [...r.querySelectorAll('td[data-value]')].map(
                 c => [c.dataset.value, c.textContent])])"""
    )
    assert len(cells) == len(run["steps"])
    for (step_no, values), step in zip(cells, run["steps"], strict=True):
        a = step["aggregate"]["read"]
        assert int(step_no) == step["step"]
        assert float(values[0][0]) == a["iops"] and values[0][1] == f"{a['iops']:,.0f}"
        assert float(values[1][0]) == a["bw_bytes"]
        assert [float(v) for v, _ in values[2:]] == [
            a["clat_ns"]["p50"],
            a["clat_ns"]["p99"],
            a["clat_ns"]["p99.9"],
        ]
    verdicts = page.page.inner_text("#verdicts")
    assert "step 3 (rate=50%, 2 clients): complete: every client" in verdicts
    assert "step 0 (max, 1 client): fill: not asked" in verdicts
    assert "step 3 (rate=50%, 2 clients): rate cap: " in verdicts
    assert "Little's law" in verdicts and "spread across clients" in verdicts
    assert run["items"][0]["agent_id"] in page.page.inner_text("#infra")
    assert json.loads(page.page.inner_text("#request"))["request"]["clients"] == [1, 2]
    assert "common window" in page.page.inner_text("pre.cli")

    assert page.errors == []
    assert all(u.startswith("file://") for u in page.requests), page.requests
    page.shot("run-report.png")
    page.page.evaluate("window.scrollTo(0, 0)")
    page.shot("run-report-top.png", full_page=False)  # README's docs/img/run-report.png


def test_series_report_marks_its_history(
    stack: Stack, sweep: dict[str, Any], browser: Browser, tmp_path: Path
) -> None:
    with httpx.Client(base_url=stack.api_url, timeout=60) as api:
        listed = api.get("/api/series").json()["series"]
        key = next(
            s["series_key"]
            for s in listed
            if s["target"] == "scratch"
            and s["clients"] == 2
            and api.get(f"/api/series/{s['series_key']}").json()["history"][-1]["run_id"]
            == sweep["run"]["id"]
        )
        history = api.get(f"/api/series/{key}").json()
        assert api.get("/api/series/0000000000000000/report").status_code == 404
    out = tmp_path / "series.html"
    r = benchctl(stack, "report", "--series", key, "-o", str(out))
    assert r.returncode == 0, r.stderr
    page = Watched(browser.new_page())
    page.page.goto(out.as_uri())
    charts = page.charts()
    drawn = _trace(charts["series-read.iops"], "read.iops")
    assert drawn["y"] == [row["read.iops"] for row in history["history"]]
    assert len(drawn["x"]) == len(history["history"])
    assert page.page.inner_text("#series-key") == key
    assert page.errors == [] and all(u.startswith("file://") for u in page.requests)
    page.shot("series-report.png")


@pytest.fixture(scope="module")
def keyed(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A second API on the same emulators that wants an API key."""
    st = dataclasses.replace(
        stack, dir=str(tmp_path_factory.mktemp("ui")), api_port=localstack.free_port(), procs=[]
    )
    env = {"BENCH_API_KEYS": f"viewer:reader:{UI_KEY}", "BENCH_TARGETS": json.dumps(TEST_TARGETS)}
    p = localstack.start_api(st, timer_seconds=0, extra_env=env)
    yield st
    localstack.stop_proc(p, timeout=5)


def test_web_ui_signs_in_filters_runs_and_shows_reports(
    keyed: Stack, sweep: dict[str, Any], browser: Browser
) -> None:
    run = sweep["run"]
    base = keyed.api_url
    with httpx.Client(base_url=base, timeout=60) as c:
        assert c.get("/ui/runs").status_code == 303  # not signed in: to the form
        assert c.get("/ui/runs?state=bogus", headers={"X-Api-Key": UI_KEY}).status_code == 400
        # The sign-in cookie reads; it never writes (a cross-site form cannot use it).
        c.cookies.set("bench_api_key", UI_KEY)
        assert c.get("/api/runs").status_code == 200
        assert c.post("/api/runs", json=run_body(sweep["pool"])).status_code == 401
        c.cookies.clear()
    context = browser.new_context()
    page = Watched(context.new_page())
    page.page.goto(f"{base}/ui/runs")
    assert page.page.url.startswith(f"{base}/ui/signin")
    page.page.fill("input[name=api_key]", UI_KEY)
    page.page.click("button[type=submit]")
    page.page.wait_for_url(f"{base}/ui/runs")
    page.page.goto(f"{base}/ui/runs?tag=suite%3Dreports&state=completed&target=scratch")
    listed = page.page.eval_on_selector_all(
        "#runs tr[data-run]", "rs => rs.map(r => r.dataset.run)"
    )
    assert run["id"] in listed
    row = page.page.inner_text(f"#runs tr[data-run='{run['id']}']")
    assert "randread 4k 1x4" in row and "1,2" in row
    page.page.goto(f"{base}/ui/runs?state=failed&tag=suite%3Dreports")
    assert run["id"] not in page.page.inner_text("#runs")

    page.page.click("nav >> text=Runs")
    page.page.goto(f"{base}/ui/runs/{run['id']}")
    charts = page.charts()
    assert len(_trace(charts["curve-scaleout"], "max")["x"]) == 2
    page.shot("ui-run.png")
    for path, table in (("/ui/series", "#series"), ("/ui/regressions", "#regressions")):
        page.page.goto(base + path)
        assert page.page.query_selector(table) is not None
    page.page.goto(f"{base}/api/docs")  # Swagger UI from the app's own files
    page.page.wait_for_selector(".opblock", timeout=30_000)
    page.shot("swagger.png")
    assert page.errors == []
    assert all(u.startswith((base, "data:")) for u in page.requests), page.requests
    context.close()


def test_export_csv_per_second_and_per_step_and_list(stack: Stack, sweep: dict[str, Any]) -> None:
    run = sweep["run"]
    r = benchctl(stack, "export", run["id"], "--format", "csv")
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    # Each client's seconds of its step's common window: the same seconds for every client.
    with httpx.Client(base_url=stack.api_url, timeout=30) as api:
        common = {
            i["id"]: api.get(f"/api/runs/{run['id']}/results/{i['id']}?window=common").json()
            for i in run["items"]
        }
    expected = [
        (item["step"], item["client"], p["t_ms"], round(p["iops"], 3), round(p["bw_bytes"], 3))
        for item in run["items"]
        for p in common[item["id"]]["series"]["read"]
    ]
    got = [
        (int(x["step"]), int(x["client"]), float(x["t_ms"]), float(x["iops"]), float(x["bw_bytes"]))
        for x in rows
    ]
    assert got == expected and {x["direction"] for x in rows} == {"read"}
    assert all(common[i]["series_window"] == "common" for i in common)
    for step in run["steps"]:
        seconds = {
            c: [x["t_ms"] for x in rows if int(x["step"]) == step["step"] and int(x["client"]) == c]
            for c in range(step["clients"])
        }
        window = step["aggregate"]["window"]
        assert len({tuple(v) for v in seconds.values()}) == 1, seconds  # the same seconds
        assert len(seconds[0]) == round(window["seconds"]), (seconds, window)
    # Figures as people write them: no 32665.000000000004 (at most three decimals).
    for x in rows:
        for col in ("iops", "bw_bytes"):
            whole, _, frac = x[col].partition(".")
            assert whole.isdigit() and len(frac) <= 3, x
    r = benchctl(stack, "export", run["id"], "--by", "step")
    steps = list(csv.DictReader(io.StringIO(r.stdout)))
    assert [float(s["iops"]) for s in steps] == [
        round(s["aggregate"]["read"]["iops"], 3) for s in run["steps"]
    ]
    assert [int(s["clients"]) for s in steps] == [1, 1, 2, 2]
    assert [s["point"] for s in steps] == ["max", "rate=50%"] * 2
    assert [float(s["p99_ns"]) for s in steps] == [
        s["aggregate"]["read"]["clat_ns"]["p99"] for s in run["steps"]
    ]

    r = benchctl(stack, "list", "--tag", "suite=reports", "--target", "scratch")
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if run["id"][:20] in x)
    agg = run["aggregate"]["read"]
    assert "randread 4k 1x4" in line and " 1,2 " in line
    assert f"{agg['iops']:,.0f}" in line and f"{agg['clat_ns']['p99'] / 1e6:.3f}" in line


def test_curve_markdown_and_compare_against_an_unfinished_run(
    stack: Stack, sweep: dict[str, Any]
) -> None:
    run, curves = sweep["run"], sweep["curves"]
    r = benchctl(stack, "show", run["id"], "--curve", "--format", "markdown")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"### Curves of run `{run['id']}`") and "┃" not in r.stdout
    for p in curves["latency"]:
        row = f"| {p['step']} | {p['point']} | {p['clients']} | {p['iops']:,.0f} |"
        assert row in r.stdout

    assert benchctl(stack, "compare", run["id"], run["id"]).returncode == 0
    with httpx.Client(base_url=stack.api_url, timeout=30) as api:
        # No agent listens on this pool: the run stays queued.
        queued = api.post("/api/runs", json=run_body(next(_pool_names))).json()["id"]
        try:
            r = benchctl(stack, "compare", run["id"], queued)
        finally:
            api.delete(f"/api/runs/{queued}")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert f"cannot compare: B {queued} is queued" in r.stderr and r.stdout == ""
