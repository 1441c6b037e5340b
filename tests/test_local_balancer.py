"""The balancer of `benchctl local up --api-instances N`: a count out of range is refused
before anything starts (exit 2 naming the option), and the configuration the stack writes
is one nginx itself accepts (`nginx -t`), with every instance as an upstream; the stack
waits until nginx has bound its port, not for any server answering there."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchctl import local_balancer
from benchctl.cli import main
from benchctl.local_procs import Proc, stop_proc
from benchctl.local_state import StackError, free_port
from tests.loopback import Quiet, serve

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


@pytest.mark.slow  # nginx tries to bind for 2.5 s before it gives up
def test_a_port_another_server_took_is_an_error_not_that_servers_answers(tmp_path: Path) -> None:
    """Another server (another stack) took the API port between the check and nginx's
    bind: it answers /api/health 200, but the stack must not take it for its balancer."""
    local_balancer.ensure_nginx()
    other, _ = serve(Healthy)
    port = other.server_address[1]
    try:
        taken = start_nginx(tmp_path / "taken", port)
        with pytest.raises(StackError, match="already in use"):
            local_balancer.wait_bound(tmp_path / "taken", taken, timeout=20)
    finally:
        other.shutdown()
    free = start_nginx(tmp_path / "free", free_port())
    try:
        local_balancer.wait_bound(tmp_path / "free", free, timeout=20)  # bound: returns
    finally:
        stop_proc(free)


class Healthy(Quiet):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()


def start_nginx(directory: Path, port: int) -> Proc:
    argv = local_balancer.nginx_argv(directory, port, [free_port()])
    log = directory / "nginx.log"
    with log.open("wb") as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return Proc("nginx", p.pid, str(log), port)
