"""benchctl export-all / import-all (a deployment's runs, series and schedules to another
one) and purge (an admin deleting a run or a series with everything it owns). Admin role.

The export is one gzip'd tar file: ``schedules.json``; per finished run, its artifacts
(``runs/<id>/artifacts/<owner>/<name>``, bytes as stored) then ``runs/<id>/bundle.json``
(its documents as stored: the run, its steps and items, results, aggregates, series points
and the regressions first seen on it); ``manifest.json`` last. The import writes each run's
artifacts, then its documents, its run document last (the commit point, as at intake), and
creates only what is missing: an import cut short is finished by running it again.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tarfile
import time
from collections.abc import Iterator
from typing import Any

from benchctl.client import Api, CliError

EXIT_OK, EXIT_BAD_INPUT = 0, 2
FORMAT, VERSION = "benchsvc-export", 1
BATCH_DOCUMENTS = 200
BATCH_BYTES = 8 << 20
# What a run's documents go into, in the order they are imported (the run document last).
RUN_PARTS = (("items", "items"), ("results", "results"), ("aggregates", "aggregates"))
LAST_PARTS = (("series", "series"), ("regressions", "regressions"))


def _json(api: Api, method: str, path: str, **kw: Any) -> Any:
    return api._call(method, path, **kw).json()


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), int(time.time())
    tar.addfile(info, io.BytesIO(data))


def _pages(api: Api) -> Iterator[dict[str, Any]]:
    token: str | None = None
    while True:
        params = {"limit": 100, **({"continuation": token} if token else {})}
        page = _json(api, "GET", "/api/admin/export/runs", params=params)
        yield page
        token = page.get("continuation")
        if not token:
            return


def cmd_export_all(a: argparse.Namespace, api: Api) -> int:
    counts = {"runs": 0, "artifacts": 0, "bytes": 0, "unfinished": 0}
    if not a.output:  # tarfile's own answer to "" is a ValueError, not an OSError
        raise CliError("-o: a file name is needed", EXIT_BAD_INPUT)
    try:
        tar = tarfile.open(a.output, "w:gz")
    except OSError as e:
        raise CliError(f"-o {a.output}: {e.strerror}", EXIT_BAD_INPUT) from None
    with tar:
        schedules = _json(api, "GET", "/api/admin/export/schedules")["schedules"]
        _add(tar, "schedules.json", json.dumps(schedules).encode())
        for page in _pages(api):
            counts["unfinished"] += len(page["unfinished"])
            for run_id in page["runs"]:
                bundle = _json(api, "GET", f"/api/admin/export/runs/{run_id}")
                for art in bundle["artifacts"]:
                    path = f"/api/admin/export/artifacts/{run_id}/{art['owner']}/{art['name']}"
                    data = api._call("GET", path).content
                    _add(tar, f"runs/{run_id}/artifacts/{art['owner']}/{art['name']}", data)
                    counts["artifacts"] += 1
                    counts["bytes"] += len(data)
                _add(tar, f"runs/{run_id}/bundle.json", json.dumps(bundle).encode())
                counts["runs"] += 1
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "source": api.base_url,
            "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "schedules": len(schedules),
            **counts,
        }
        _add(tar, "manifest.json", json.dumps(manifest, indent=2).encode())
    print(
        f"exported {counts['runs']} runs ({counts['artifacts']} artifacts, "
        f"{counts['bytes']:,} bytes) and {len(schedules)} schedules to {a.output}",
        file=sys.stderr,
    )
    if counts["unfinished"]:
        print(
            f"left out {counts['unfinished']} runs still going: export again once they finish",
            file=sys.stderr,
        )
    return EXIT_OK


class _Counts:
    def __init__(self) -> None:
        self.created = self.existing = 0

    def add(self, reply: dict[str, Any]) -> None:
        self.created += reply["created"]
        self.existing += reply["existing"]


def _batches(entries: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Consecutive batches of bounded count and size (at least one, maybe empty)."""
    batch: list[dict[str, Any]] = []
    size = 0
    for entry in entries:
        n = len(json.dumps(entry))
        if batch and (len(batch) >= BATCH_DOCUMENTS or size + n > BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(entry)
        size += n
    yield batch


def _import_run(api: Api, bundle: dict[str, Any], counts: _Counts) -> None:
    """A run's documents in batches, each naming the run; the last commits it (its own
    document is written after everything it owns)."""
    run = bundle["run"]
    entries = [
        {"container": container, "doc": doc}
        for key, container in RUN_PARTS + LAST_PARTS
        for doc in bundle[key]
    ]
    batches = list(_batches(entries))
    for i, batch in enumerate(batches):
        body = {"run": run, "documents": batch, "commit": i == len(batches) - 1}
        counts.add(_json(api, "POST", f"/api/admin/import/runs/{run['id']}", json=body))


def _member(tar: tarfile.TarFile, name: str) -> bytes:
    try:
        f = tar.extractfile(name)
    except KeyError:
        raise CliError(f"not an export of benchctl export-all: no {name}", EXIT_BAD_INPUT) from None
    if f is None:
        raise CliError(f"not an export of benchctl export-all: {name}", EXIT_BAD_INPUT)
    return f.read()


def cmd_import_all(a: argparse.Namespace, api: Api) -> int:
    try:
        tar = tarfile.open(a.file, "r:gz")
    except (OSError, ValueError, tarfile.TarError) as e:  # ValueError: an empty name
        raise CliError(f"{a.file}: {e}", EXIT_BAD_INPUT) from None
    with tar:
        manifest = json.loads(_member(tar, "manifest.json"))
        if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
            raise CliError(f"{a.file}: not a {FORMAT} version {VERSION} file", EXIT_BAD_INPUT)
        docs = _Counts()
        schedules = json.loads(_member(tar, "schedules.json"))
        for start in range(0, max(len(schedules), 1), BATCH_DOCUMENTS):
            batch = {"schedules": schedules[start : start + BATCH_DOCUMENTS]}
            docs.add(_json(api, "POST", "/api/admin/import/schedules", json=batch))
        artifacts = runs = 0
        for member in tar.getmembers():
            parts = member.name.split("/")
            if len(parts) == 5 and parts[0] == "runs" and parts[2] == "artifacts":
                run_id, owner, name = parts[1], parts[3], parts[4]
                path = f"/api/admin/import/artifacts/{run_id}/{owner}/{name}"
                data = _member(tar, member.name)
                api._call("PUT", path, content=data, headers={"Content-Type": "application/gzip"})
                artifacts += 1
            elif len(parts) == 3 and parts[0] == "runs" and parts[2] == "bundle.json":
                _import_run(api, json.loads(_member(tar, member.name)), docs)
                runs += 1
    print(
        f"imported {runs} runs ({artifacts} artifacts) and {manifest['schedules']} schedules "
        f"from {manifest['source']}: {docs.created} documents created, "
        f"{docs.existing} already there",
        file=sys.stderr,
    )
    return EXIT_OK


def cmd_purge(a: argparse.Namespace, api: Api) -> int:
    if bool(a.run_id) == bool(a.series):
        raise CliError("give a RUN or --series KEY (one of the two)", EXIT_BAD_INPUT)
    path = f"/api/admin/series/{a.series}" if a.series else f"/api/admin/runs/{a.run_id}"
    removed = _json(api, "DELETE", path)["removed"]
    what = ", ".join(f"{n} {k}" for k, n in sorted(removed.items())) or "nothing"
    print(f"removed {what}")
    return EXIT_OK


def add_parsers(sub: Any) -> None:
    ex = sub.add_parser("export-all", help="a deployment's runs, series and schedules to a file")
    ex.add_argument("-o", "--output", metavar="FILE", required=True, help="a .tar.gz to write")
    ex.set_defaults(api_func=cmd_export_all)
    im = sub.add_parser("import-all", help="what export-all wrote, into this deployment")
    im.add_argument("file", metavar="FILE")
    im.set_defaults(api_func=cmd_import_all)
    pu = sub.add_parser("purge", help="delete a finished run, or a series, with all it owns")
    pu.add_argument("run_id", nargs="?", metavar="RUN")
    pu.add_argument("--series", metavar="KEY", help="a series instead of a run")
    pu.set_defaults(api_func=cmd_purge)
