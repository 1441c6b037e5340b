"""benchctl never answers a mistake with a traceback: bad input exits 2 naming the field or
flag, whatever the argument list (hypothesis generates them from benchctl's own parser),
with no API, against the real API, and for the mistakes people made."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchctl.cli import main, parser
from benchctl.localstack import Stack
from tests.conftest import FUZZ_POOL, FUZZ_TARGET

EXIT_CODES = {0, 1, 2, 3, 4}
WORDS = [
    *("4k", "0", "-1", "1e309", "nan", "inf", "65536", "1,2,4", "x=", "=y", "k=v"),
    *("iodepth=1,4", "rate_pct=10", "bs=4k", "r-" + "0" * 32, "sch-0123456789abcdef"),
    *("smoke-randread-4kk", "smoke-randread-4k", "randread", "json", "markdown"),
    *("table", "csv", "step", "second", "expected", "new", "* * * * *", "61 * * * *"),
]


def commands(p: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every (sub)command path and its parser."""
    out: dict[tuple[str, ...], Any] = {}
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {path: p}
    for name, sub in subs[0].choices.items():
        out |= commands(sub, (*path, name))
    return out


COMMANDS = commands(parser())
# `local up` would start a stack of emulators: its checks have their own tests.
OFFLINE = {k: v for k, v in COMMANDS.items() if k != ("local", "up")}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("inputs")
    made = {
        "json": '{"target": "scratch", "workload": {"bs": "4k"}}',
        "notjson": "{oops",
        "list": "[1, 2]",
        "csv": "timestamp,value\n" + "".join(f"{i},{100 + i % 3}\n" for i in range(12)),
        "badcsv": "timestamp,value\n1,abc\n",
        "binary": "\x00\x01\xff",
        "fio": '{"jobs": []}',
    }
    out = {}
    for name, text in made.items():
        (d / name).write_text(text)
        out[name] = str(d / name)
    out["dir"] = str(d)
    out["missing"] = str(d / "no" / "such")
    return out


def values(files: dict[str, str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(list(files.values())),
        st.sampled_from(list(files.values())),  # twice: files are where reading goes wrong
        st.sampled_from(WORDS),
        # What argv can hold: text without NUL, and bytes that are not UTF-8, which Python
        # hands over as surrogate escapes (PEP 383).
        st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12),
        st.sampled_from(["\udcff", "x\udc80y", "4\udce9k"]),
        st.integers(-(2**70), 2**70).map(str),
    )


def value_for(action: argparse.Action, files: dict[str, str]) -> st.SearchStrategy[str]:
    """A file where the flag names one (its metavar says FILE), often a bad one."""
    if "FILE" in str(action.metavar or ""):
        return st.one_of(st.sampled_from(list(files.values())), values(files))
    return values(files)


def argv_for(draw: Any, path: tuple[str, ...], p: argparse.ArgumentParser, files: Any) -> list[str]:
    """Mostly well-formed: the command's own flags, with a value where the flag takes one
    (one of its choices, or anything), its positionals, and now and then a stray word."""
    flags = [a for a in p._actions if a.option_strings and a.dest != "help"]
    positionals = [a for a in p._actions if not a.option_strings]
    argv = list(path)
    for action in draw(st.lists(st.sampled_from(flags), max_size=5)) if flags else []:
        argv.append(draw(st.sampled_from(action.option_strings)))
        if action.nargs == 0:
            continue
        if action.choices and draw(st.booleans()):
            argv.append(str(draw(st.sampled_from(list(action.choices)))))
        else:
            argv.append(draw(value_for(action, files)))
    for action in positionals:
        if draw(st.integers(0, 9)):
            argv.append(draw(value_for(action, files)))
    if not draw(st.integers(0, 4)):
        argv.insert(draw(st.integers(len(path), len(argv))), draw(values(files)))
    return argv


def run_main(argv: list[str]) -> tuple[int, str, str]:
    """main(argv) with the standard streams a process has (stdout strict UTF-8, stderr
    with backslash escapes, as Python sets them up), their text, and the exit code."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse: --help (0) or a usage error (2)
            code = e.code if isinstance(e.code, int) else 2
            assert code in (0, 2), argv
        out.flush()
        err.flush()
    text = [b.buffer.getvalue().decode("utf-8", "replace") for b in (out, err)]
    return code, text[0], text[1]


def assert_clean(argv: list[str]) -> tuple[int, str]:
    code, out, err = run_main(argv)
    assert "Traceback" not in out + err, (argv, err[-2000:])
    assert code in EXIT_CODES, (argv, code, err)
    if code == 2:
        assert err.strip(), argv  # a reason, naming what is wrong
    return code, err


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No API anywhere: no flag, variable, config file or local stack."""
    for var in ("BENCH_API_URL", "BENCH_API_KEY", "BENCH_API_SCOPE", "BENCHCTL_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("BENCH_LOCAL_DIR", str(tmp_path / "local"))
    monkeypatch.chdir(tmp_path)
    yield


@pytest.mark.parametrize("path", sorted(OFFLINE), ids=" ".join)
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_argument_list_gets_a_traceback_without_an_api(
    path: tuple[str, ...],
    data: st.DataObject,
    files: dict[str, str],
    offline: None,
) -> None:
    argv = argv_for(data.draw, path, OFFLINE[path], files)
    assert_clean(argv)


# Against the real API: commands that read, and runs on the pool no agent listens on.
ONLINE = sorted(
    k for k in COMMANDS if k[0] not in ("local", "schedule", "cancel", "triage", "follow")
)


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_argument_list_gets_a_traceback_from_the_api(
    data: st.DataObject,
    stack: Stack,
    files: dict[str, str],
    offline: None,
) -> None:
    path = data.draw(st.sampled_from(ONLINE))
    argv = argv_for(data.draw, path, COMMANDS[path], files)
    argv = [a for a in argv if a not in ("--wait", "--pool")]  # nothing waits, nothing runs
    if path == ("run",):
        argv += ["--pool", FUZZ_POOL, "--target", FUZZ_TARGET]
    assert_clean(["--api-url", stack.api_url, *argv])


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["run", "--profile", "smoke-randread-4kk", "--target", "x"], "profile:"),
        (["run", "--request", "MISSING", "--target", "x"], "--request"),
        (["run", "--request", "NOTJSON"], "--request"),
        (["run", "--request", "LIST"], "--request"),
        (["run", "--target", "x", "--clients", "0"], "clients"),
        (["run", "--target", "x", "--junit", "out.xml"], "--junit needs --wait"),
        (["run", "--target", "x", "--fail-on-regression"], "--fail-on-regression needs --wait"),
        (
            ["schedule", "create", "--cron", "0 3 * * *", "--owner", "me", "--request", "MISSING"],
            "--request",
        ),
        (["clean", "../runs"], "target: '../runs' is not a target alias"),
        (["detect", "MISSING"], "MISSING"),
        # Bytes a terminal could not decode reach argv as lone surrogates (PEP 383).
        (["list", "--target", "\udcff"], "target: not valid UTF-8 text"),
        (["aggregate", "DIR"], "DIR"),
    ],
)
def test_the_mistakes_people_made_exit_2_naming_the_field(
    argv: list[str], named: str, files: dict[str, str], offline: None
) -> None:
    subst = {"MISSING": files["missing"], "NOTJSON": files["notjson"], "LIST": files["list"]}
    subst["DIR"] = files["dir"]
    argv = [subst.get(a, a) for a in argv]
    named = subst.get(named, named)
    code, err = assert_clean(argv)
    assert code == 2 and named in err, err


def test_a_typo_in_a_profile_is_named_with_the_closest_profile(stack: Stack, offline: None) -> None:
    argv = ["--api-url", stack.api_url, "run", "--profile", "smoke-randread-4kk"]
    code, err = assert_clean([*argv, "--target", FUZZ_TARGET, "--pool", FUZZ_POOL])
    assert code == 2
    assert "profile: no profile 'smoke-randread-4kk'" in err and "smoke-randread-4k?" in err
    # The API says the same to a caller that skipped the CLI's check.
    body = {"profile": "smoke-randread-4kk", "target": FUZZ_TARGET, "pool": FUZZ_POOL}
    r = httpx.post(f"{stack.api_url}/api/runs", json=body)
    assert r.status_code == 400
    assert any(e["field"] == "profile" for e in r.json()["errors"]), r.text
    assert json.dumps(r.json()).count("smoke-randread-4k?") == 1


@pytest.mark.parametrize("argv", [["export-all", "-o", ""], ["import-all", ""]])
def test_an_empty_archive_name_exits_2_naming_it(argv: list[str]) -> None:
    # tarfile answers "" with a ValueError, not an OSError: once a traceback (exit 1).
    code, _, err = run_main(["--api-url", "http://127.0.0.1:9", *argv])
    assert code == 2, err
    assert "Traceback" not in err and err.startswith("benchctl: ")
