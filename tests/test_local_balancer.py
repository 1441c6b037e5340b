"""The balancer of `benchctl local up --api-instances N`: a count out of range is refused
before anything starts (exit 2 naming the option), and the configuration the stack writes
is one nginx itself accepts (`nginx -t`), with every instance as an upstream."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchctl import local_balancer
from benchctl.cli import main

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("count", ["0", "17", "-1"])
def test_an_instance_count_out_of_range_is_refused_before_anything_starts(
    count: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BENCH_LOCAL_DIR", str(tmp_path / "stack"))
    (tmp_path / "scratch").mkdir()
    code = main(
        ["local", "up", "--api-instances", count, "--target", f"scratch={tmp_path / 'scratch'}"]
    )
    assert code == 2
    assert "--api-instances" in capsys.readouterr().err
    assert not (tmp_path / "stack" / "stack.json").exists()  # nothing was started


def test_nginx_accepts_the_configuration_the_stack_writes(tmp_path: Path) -> None:
    local_balancer.ensure_nginx()
    argv = local_balancer.nginx_argv(tmp_path / "nginx", 7071, [40001, 40002, 40003])
    checked = subprocess.run([*argv, "-t"], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    conf = (tmp_path / "nginx" / "nginx.conf").read_text()
    assert "listen 127.0.0.1:7071;" in conf
    assert all(f"server 127.0.0.1:{p} " in conf for p in (40001, 40002, 40003))
