"""Pages as a person sees them: headless Chromium (Debian's /usr/bin/chromium, driven by
Playwright) with every console error, failed response and request recorded, and what a
chart drew read back from plotly and from the SVG it painted."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Page, sync_playwright

from benchctl.localstack import Stack

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / ".local" / "screenshots"
DOCS_IMG = ROOT / "docs" / "img"
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


@contextmanager
def chromium() -> Iterator[Browser]:
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
                   mode: t.mode, x: Array.from(t.x || []), y: Array.from(t.y || []),
                   z: t.z ? Array.from(t.z, r => Array.from(r)) : null,
                   text: t.text ? Array.from(t.text, r => Array.isArray(r) ? Array.from(r) : r)
                                : null}))]))"""
        )
        return charts

    def lines(self, chart: str) -> dict[str, list[tuple[float, float]]]:
        """Each scatter trace's line as painted: its vertices in pixels (none for a trace
        drawn as markers only), by trace name."""
        found: dict[str, list[tuple[float, float]]] = self.page.evaluate(
            """(id) => {
                 const div = document.getElementById(id);
                 const traces = [...div.querySelectorAll('.scatterlayer .trace')];
                 return Object.fromEntries(traces.map((g, i) => {
                   const path = g.querySelector('path.js-line');
                   const d = path ? path.getAttribute('d') || '' : '';
                   const pts = [...d.matchAll(/[ML]([-\\d.e]+),([-\\d.e]+)/g)]
                     .map(m => [parseFloat(m[1]), parseFloat(m[2])]);
                   return [div.data.filter(t => (t.type || 'scatter') === 'scatter')[i].name,
                           pts];
                 }));
               }""",
            chart,
        )
        return found

    def shot(
        self, name: str, *, selector: str | None = None, docs: bool = False, full_page: bool = True
    ) -> Path:
        """A screenshot kept in .local/screenshots (and docs/img for the README): the whole
        page, what the window shows (``full_page=False``), or one element."""
        paths = [SHOTS / name] + ([DOCS_IMG / name] if docs else [])
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            if selector:
                self.page.locator(selector).screenshot(path=str(path))
            else:
                self.page.screenshot(path=str(path), full_page=full_page)
        return paths[-1]


def benchctl(stack: Stack, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchctl", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "BENCH_API_URL": stack.api_url, "BENCH_API_KEY": ""},
        **kw,
    )


def trace(traces: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(t for t in traces if t["name"] == name)
