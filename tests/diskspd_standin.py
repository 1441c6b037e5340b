#!/usr/bin/env python3
"""Stands in for diskspd.exe, which cannot run on Linux. It checks the argv the agent built
(no shell, our flags, files under the agent's mount) and models what the agent relies on,
from microsoft/diskspd's IORequestGenerator.cpp:

- with ``-c<size>`` it creates every target at that size, replacing what was there
  (``_CreateFile``: ``CREATE_ALWAYS``), then runs ``-d`` seconds;
- without ``-c`` a missing target is an error (DiskSpd opens it and fails), and nothing is
  created or resized;
- a run is set-up (threads, opening files), warm-up ``-W``, measured ``-d``, cool-down
  ``-C``; only then is ``<RunTime>`` stamped (UTC, whole seconds) and the XML printed, in
  DiskSpd's documented format (tests/data/diskspd/with-latency-and-iops.xml, cut to the
  measured seconds with counts that agree with its ``-D`` buckets).

Each invocation appends one JSON line to ``diskspd-standin.jsonl`` beside the first target:
its argv, the target sizes it found and left, and the instants its phases began.
"""

from __future__ import annotations

import json
import sys
import time
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

SETUP_S = 0.3  # DiskSpd's set-up before the warm-up: threads, each opening every target
FIXTURE = Path(__file__).parent / "data" / "diskspd" / "with-latency-and-iops.xml"
SUFFIX = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def fail(message: str) -> None:
    print(f"stand-in: {message}", file=sys.stderr)
    sys.exit(1)


def size(text: str) -> int:
    unit = SUFFIX.get(text[-1:].upper(), 1)
    return int(text[:-1] if unit > 1 else text) * unit


def flag(args: list[str], name: str, default: str | None = None) -> str:
    values = [a[len(name) :] for a in args if a.startswith(name)]
    if not values:
        if default is None:
            fail(f"missing {name} in {args}")
        return default or ""
    return values[-1]


def sizes(files: list[str]) -> dict[str, int | None]:
    return {f: Path(f).stat().st_size if Path(f).exists() else None for f in files}


def measured_xml(warmup: int, duration: int, cooldown: int, test_time: float, stamp: float) -> str:
    root = ET.fromstring(FIXTURE.read_text())
    span = root.find("Profile/TimeSpans/TimeSpan")
    assert span is not None
    for tag, value in (("Warmup", warmup), ("Duration", duration), ("Cooldown", cooldown)):
        span.find(tag).text = str(value)  # type: ignore[union-attr]
    when = datetime.fromtimestamp(stamp, UTC)
    root.find("System/RunTime").text = (  # type: ignore[union-attr]
        f"{when.year}/{when.month:02}/{when.day:02} "
        f"{when.hour:02}:{when.minute:02}:{when.second:02} UTC"
    )
    result = root.find("TimeSpan")
    assert result is not None
    result.find("TestTimeSeconds").text = f"{test_time:.2f}"  # type: ignore[union-attr]
    for iops in result.iter("Iops"):
        for bucket in iops.findall("Bucket"):
            if int(bucket.get("SampleMillisecond", "0")) > duration * 1000:
                iops.remove(bucket)
    block = int(root.findtext("Profile/TimeSpans/TimeSpan/Targets/Target/BlockSize") or 0)
    for target in result.iter("Target"):
        counts = {
            d: sum(int(b.get(d, "0")) for b in target.findall("Iops/Bucket"))
            for d in ("Read", "Write")
        }
        for d, n in counts.items():
            target.find(f"{d}Count").text = str(n)  # type: ignore[union-attr]
            target.find(f"{d}Bytes").text = str(n * block)  # type: ignore[union-attr]
        target.find("IOCount").text = str(sum(counts.values()))  # type: ignore[union-attr]
        target.find("BytesCount").text = str(sum(counts.values()) * block)  # type: ignore[union-attr]
    return ET.tostring(root, encoding="unicode")


def main() -> None:
    launched = time.time()
    args = sys.argv[1:]
    files = [a for a in args if not a.startswith("-")]
    if not files or not all("/benchsvc/" in f for f in files):
        fail(f"unexpected target files {files}")
    log: dict[str, object] = {"argv": args, "launched": launched, "found": sizes(files)}
    warmup, duration = int(flag(args, "-W", "5")), int(flag(args, "-d", "10"))
    cooldown = int(flag(args, "-C", "0"))
    create = flag(args, "-c", "")
    if create:
        for f in files:
            with open(f, "wb") as out:  # CREATE_ALWAYS, then the end of file set
                out.truncate(size(create))
    else:
        missing = [f for f, n in sizes(files).items() if n is None]
        if missing:
            fail(f"Error opening file: {missing[0]} [2] (no -c: DiskSpd creates nothing)")
        missing_flags = {"-Rxml", "-L", "-D1000", "-Sh"} - set(args)
        if missing_flags:
            fail(f"missing {sorted(missing_flags)} in {args}")
    time.sleep(SETUP_S)
    log["warmup_began"] = time.time()
    time.sleep(warmup)
    log["measured_began"] = measured = time.time()
    time.sleep(duration)
    test_time = time.time() - measured
    log["cooldown_began"] = time.time()
    time.sleep(cooldown)
    stamp = time.time()
    log["stamped"] = stamp
    log["left"] = sizes(files)
    with (Path(files[0]).parent / "diskspd-standin.jsonl").open("a") as out:
        out.write(json.dumps(log) + "\n")
    if "-Rxml" in args:
        sys.stdout.write(measured_xml(warmup, duration, cooldown, test_time, stamp))
    else:
        print(f"actual test time: {test_time:.2f}s")


main()
