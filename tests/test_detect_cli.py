"""`benchctl detect` on synthetic series with planted steps and on pure noise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # each runs the CLI: a Python start-up of seconds


def series_csv(tmp_path: Path, values: np.ndarray, name: str) -> Path:
    path = tmp_path / name
    rows = [f"2026-11-{1 + i // 24:02d}T{i % 24:02d}:00:00Z,{v:.3f}" for i, v in enumerate(values)]
    path.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    return path


def detect(path: Path, *flags: str) -> list[dict[str, object]]:
    out = subprocess.run(
        [sys.executable, "-m", "benchctl", "detect", "--format", "json", *flags, str(path)],
        capture_output=True,
        text=True,
    )
    found: list[dict[str, object]] = json.loads(out.stdout)["change_points"]
    # Exit 3 when a regression was found (without a direction, any change), else 0.
    regressed = any(cp.get("kind", "regression") == "regression" for cp in found)
    assert out.returncode == (3 if regressed else 0), out.stderr
    return found


@pytest.mark.parametrize("noise", [0.015, 0.04])
def test_iops_drop_of_10_percent_is_a_regression(tmp_path: Path, noise: float) -> None:
    rng = np.random.default_rng(7)
    iops = np.r_[np.full(60, 50_000.0), np.full(60, 45_000.0)]
    values = iops * (1 + rng.normal(0, noise, iops.size))
    (cp,) = detect(series_csv(tmp_path, values, "iops.csv"), "--higher-is-better")
    assert abs(int(cp["index"]) - 60) <= 2 and cp["kind"] == "regression"  # type: ignore[call-overload]
    assert float(cp["change_pct"]) == pytest.approx(-10, abs=2)  # type: ignore[arg-type]


@pytest.mark.parametrize("noise", [0.015, 0.04])
def test_p99_rise_of_30_percent_is_a_regression(tmp_path: Path, noise: float) -> None:
    rng = np.random.default_rng(11)
    p99 = np.r_[np.full(50, 800_000.0), np.full(50, 1_040_000.0)]
    values = p99 * (1 + rng.normal(0, noise, p99.size))
    (cp,) = detect(series_csv(tmp_path, values, "p99.csv"), "--lower-is-better")
    assert abs(int(cp["index"]) - 50) <= 2 and cp["kind"] == "regression"  # type: ignore[call-overload]
    assert str(cp["timestamp"]).startswith("2026-11-")


def test_pure_noise_of_150_points_has_no_change(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    values = 50_000.0 * (1 + rng.normal(0, 0.03, 150))
    assert detect(series_csv(tmp_path, values, "noise.csv")) == []


def test_bad_csv_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("when,how\n1,2\n")
    r = subprocess.run(
        [sys.executable, "-m", "benchctl", "detect", str(bad)], capture_output=True, text=True
    )
    assert r.returncode == 2 and "bad.csv" in r.stderr


def test_min_magnitude_flag_sets_the_floor(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    iops = np.r_[np.full(60, 50_000.0), np.full(60, 48_500.0)]  # -3 %
    path = series_csv(tmp_path, iops * (1 + rng.normal(0, 0.002, iops.size)), "small.csv")
    (cp,) = detect(path)  # above the default floor of 2 %
    assert abs(int(cp["index"]) - 60) <= 2  # type: ignore[call-overload]
    assert detect(path, "--min-magnitude", "5") == []
    assert len(detect(path, "--min-magnitude", "0")) == 1


@pytest.mark.parametrize("value", ["-1", "nan"])
def test_bad_min_magnitude_exits_2(tmp_path: Path, value: str) -> None:
    path = series_csv(tmp_path, np.full(30, 1.0), "flat.csv")
    r = subprocess.run(
        [sys.executable, "-m", "benchctl", "detect", "--min-magnitude", value, str(path)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "--min-magnitude" in r.stderr
