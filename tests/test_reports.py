"""Reports, the web UI, the exports and the local Swagger UI on a real run (issue 16),
looked at in headless Chromium (Debian's /usr/bin/chromium, driven by Playwright).

One real run for the module: 2 agents, a client sweep 1 -> 2 crossed with a rate sweep
(unthrottled, then capped at 50 % and 100 % of it) of short fio steps, so every chart
(per-second timelines, the latency-versus-IOPS and scale-out curves, the histogram, each
client's seconds, share and skew, limits, host counters) has real data. Screenshots go to
.local/screenshots/ (and docs/img/ for the README).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser

from benchctl import localstack
from benchctl.localstack import Stack
from core.engines.fio_output import percentile_from_bins
from core.latency import format_ns
from reports.page import plotly_js
from tests.browser import Watched, benchctl, chromium, trace
from tests.conftest import TEST_TARGETS, _agent_ids, _pool_names, run_body, wait_state

pytestmark = pytest.mark.fio
UI_KEY = "ui-reader-key-0123456789ab"


@pytest.fixture(scope="module")
def sweep(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A completed run of six steps (1 client: max, 50 %, 100 %; 2 clients: the same), its
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
            body = run_body(pool, runtime=2)
            body.update(clients=[1, 2], sweep={"rate_pct": [50, 100]}, tags={"suite": "reports"})
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
    with chromium() as b:
        yield b


_trace = trace


# It holds the 50 % rate step to half the unthrottled step's IOPS, a CPU-bound figure on
# tmpfs: beside the other lanes the rate step can get less CPU than the step it halves
# (rehearsal of bb91309, 13:36 UTC: 11,988 IOPS against 13,896 +- 10 %), so it runs with
# nothing else of the suite (the timing phase), as test_gate_stack.py's baseline does.
@pytest.mark.timing
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
    # The latency curve as Vdbench draws one: per client count, one connected line per
    # percentile over the rate points, lowest rate first; the unthrottled step apart.
    lat = charts["curve-latency"]
    painted = page.lines("curve-latency")
    assert len(curves["latency"]) == 6
    for n, label in ((1, "1 client"), (2, "2 clients")):
        mine = [p for p in curves["latency"] if p["clients"] == n]
        rates = [p for p in mine if p["mode"] == "rate"]
        assert [p["point"] for p in rates] == ["rate=50%", "rate=100%"]
        for level in ("p50", "p99", "p99.9"):
            drawn = _trace(lat, f"read {level} ({label})")
            assert drawn["x"] == [p["iops"] for p in rates]
            assert drawn["y"] == [p[f"read_lat_{level}_ns"] / 1e6 for p in rates]
            assert len(painted[f"read {level} ({label})"]) == 2  # a line through both points
        # A known load: the 50 % step ran at half the unthrottled IOPS (fio's rate cap).
        (top,) = [p for p in mine if p["mode"] == "rate-max"]
        assert rates[0]["iops"] == pytest.approx(top["iops"] / 2, rel=0.1)
    apart = _trace(lat, "read p99 unthrottled (max IOPS)")
    assert apart["mode"] == "markers" and painted["read p99 unthrottled (max IOPS)"] == []
    assert sorted(apart["x"]) == sorted(
        p["iops"] for p in curves["latency"] if p["mode"] == "rate-max"
    )

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
        # The drawn histogram is the one the aggregate's total-latency percentiles come
        # from: recomputed from the bars as drawn, they are the API's; it holds every I/O
        # of the window (counted exactly by fio's json+ outputs; the window's I/Os are
        # read from its IOPS log, rates in whole I/Os per second over a stamped interval).
        bars = _trace(charts[f"histogram-step{n}"], "read")
        drawn_hist = {round(x * 1e6): y for x, y in zip(bars["x"], bars["y"], strict=True)}
        for name, pct in (("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9)):
            assert percentile_from_bins(drawn_hist, pct) == agg["read"]["lat_ns"][name]
        assert sum(bars["y"]) == pytest.approx(agg["read"]["window_ios"], rel=0.005)
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
        p_total = [a["lat_ns"]["p50"], a["lat_ns"]["p99"], a["lat_ns"]["p99.9"]]
        assert [float(v) for v, _ in values[2:]] == p_total
        assert [text for _, text in values[2:]] == [format_ns(v) for v in p_total]  # µs, ms
    header = page.page.inner_text("#headline tr:first-child")
    assert "total p50" in header and "total p99.9" in header and " ms" not in header
    verdicts = page.page.inner_text("#verdicts")
    assert "step 4 (rate=50%, 2 clients): complete: every client" in verdicts
    assert "step 0 (max, 1 client): fill: not asked" in verdicts
    assert "step 4 (rate=50%, 2 clients): rate cap: " in verdicts
    assert "Little's law" in verdicts and "spread across clients" in verdicts
    assert run["items"][0]["agent_id"] in page.page.inner_text("#infra")
    assert json.loads(page.page.inner_text("#request"))["request"]["clients"] == [1, 2]
    assert "common window" in page.page.inner_text("pre.cli")

    assert page.errors == []
    assert all(u.startswith("file://") for u in page.requests), page.requests
    page.shot("run-report-full.png")
    page.page.evaluate("window.scrollTo(0, 0)")
    page.shot("run-report.png", full_page=False, docs=True)  # README's first picture
    # README's pictures of a rate sweep: its results, then its curve and a histogram.
    page.shot("run-report-rate-sweep.png", selector="#headline", docs=True)
    page.shot("run-report-rate-curve.png", selector="#curve-latency", docs=True)
    page.shot("run-report-histogram.png", selector="#histogram-step0", docs=True)


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
    p99 = _trace(charts["series-read.lat"], "read.lat.p99")
    title = "document.getElementById('series-read.lat').querySelector('.gtitle').textContent"
    unit = page.page.evaluate(title).rsplit(", ", 1)[1]  # the unit its largest figure needs
    scale = {"µs": 1e3, "ms": 1e6}[unit]
    assert p99["y"] == [row["read.lat.p99"] / scale for row in history["history"]]
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
    # The last step's figures, as the API gives them and benchctl list shows them.
    last = run["aggregate"]["read"]
    cells = page.page.eval_on_selector_all(
        f"#runs tr[data-run='{run['id']}'] td[data-value]",
        "cs => cs.map(c => [c.classList[0], c.dataset.value, c.textContent])",
    )
    assert cells == [
        ["iops", str(last["iops"]), f"{last['iops']:,.0f}"],
        ["mibs", str(last["bw_bytes"]), f"{last['bw_bytes'] / 2**20:,.1f}"],
        ["p99", str(last["lat_ns"]["p99"]), f"total {format_ns(last['lat_ns']['p99'])}"],
    ]
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
    # Operations grouped by tag, the agents' protocol apart at the end, nothing "default".
    groups = page.page.eval_on_selector_all(
        ".opblock-tag-section",
        """ss => ss.map(s => [s.querySelector('.opblock-tag').dataset.tag,
              [...s.querySelectorAll('.opblock-summary-path')].map(p => p.dataset.path)])""",
    )
    names = [g for g, _ in groups]
    assert names[0] == "runs" and names[-1] == "agent protocol" and "default" not in names
    agent_paths = [p for g, paths in groups for p in paths if p.startswith("/api/agent/")]
    assert agent_paths and all(p.startswith("/api/agent/") for p in dict(groups)["agent protocol"])
    assert set(agent_paths) == set(dict(groups)["agent protocol"])
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
    assert [int(s["clients"]) for s in steps] == [1, 1, 1, 2, 2, 2]
    assert [s["point"] for s in steps] == ["max", "rate=50%", "rate=100%"] * 2
    for kind in ("lat", "clat"):
        assert [float(s[f"{kind}_p99_ns"]) for s in steps] == [
            s["aggregate"]["read"][f"{kind}_ns"]["p99"] for s in run["steps"]
        ]

    r = benchctl(stack, "list", "--tag", "suite=reports", "--target", "scratch")
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if run["id"][:20] in x)
    agg = run["aggregate"]["read"]
    assert "randread 4k 1x4" in line and " 1,2 " in line
    assert f"{agg['iops']:,.0f}" in line and f"total {format_ns(agg['lat_ns']['p99'])}" in line


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
