#!/usr/bin/env python3
"""Stands in for diskspd.exe, which cannot run on Linux. It checks the argv the agent
built (no shell, our flags, files under the agent's mount) and prints a DiskSpd -Rxml
output in DiskSpd's documented format (tests/data/diskspd)."""

import sys
import time
from pathlib import Path

args = sys.argv[1:]
expected = {"-Rxml", "-L", "-D1000", "-Sh"}
missing = expected - set(args)
if missing:
    print(f"stand-in: missing {sorted(missing)} in {args}", file=sys.stderr)
    sys.exit(1)
files = [a for a in args if not a.startswith("-")]
if not files or not all("/benchsvc/" in f for f in files):
    print(f"stand-in: unexpected target files {files}", file=sys.stderr)
    sys.exit(1)
time.sleep(1)
fixture = Path(__file__).parent / "data" / "diskspd" / "with-latency-and-iops.xml"
sys.stdout.write(fixture.read_text())
