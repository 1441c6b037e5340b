#!/usr/bin/env python3
"""The Teams app package of the bot: manifest.json and its two icons, zipped, ready to upload
(docs/deploy.md, "The Teams bot").

    python scripts/teams_manifest.py --bot-id <TEAMS_BOT_APP_ID> --api-url <API_URL> \\
        [--out dist/teams-app.zip] [--version 1.0.0]

The bot id is the Azure Bot's Microsoft App ID: the Function App's user-assigned identity's
client id (azd output TEAMS_BOT_APP_ID). Manifest schema 1.17; the bot works in personal
chats, group chats and teams' channels, and lists its commands in Teams' command menu. The
icons are drawn here (Teams requires a 192 x 192 colour icon and a 32 x 32 white-on-
transparent outline), so the package needs nothing but this script.
"""

from __future__ import annotations

import argparse
import json
import re
import struct
import sys
import uuid
import zipfile
import zlib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

SCHEMA = "https://developer.microsoft.com/en-us/json-schemas/teams/v1.17/MicrosoftTeams.schema.json"
GUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
ACCENT = (0x00, 0x78, 0xD4)  # the colour icon's background
# Teams shows at most 10 commands per scope in its menu.
COMMANDS = [
    ("help", "What the bot can do, and a form to start a run"),
    ("run", "run <profile> on <target> [with N clients] [for 60s]"),
    ("status", "status <run>: where a run is, and its figures"),
    ("cancel", "cancel <run>: stop a run"),
    ("compare", "compare <run-a> <run-b>: side by side, against the noise"),
    ("profiles", "The workload catalogue"),
    ("targets", "The volumes you can test, and whether they are busy"),
    ("schedules", "The scheduled runs"),
    ("subscribe", "subscribe <series>: its regressions, posted here"),
    ("unsubscribe", "unsubscribe <series>"),
]
SCOPES = ["personal", "team", "groupChat"]


def manifest(bot_id: str, api_url: str, version: str) -> dict[str, Any]:
    host = urlsplit(api_url).hostname or ""
    return {
        "$schema": SCHEMA,
        "manifestVersion": "1.17",
        "version": version,
        # The app's own id: derived from the bot's, so regenerating updates the same app.
        "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"benchsvc-teams-app:{bot_id}")),
        "developer": {
            "name": "Storage benchmarks",
            "websiteUrl": f"{api_url}/ui",
            "privacyUrl": f"{api_url}/ui",
            "termsOfUseUrl": f"{api_url}/ui",
        },
        "name": {"short": "Bench", "full": "Storage benchmarks"},
        "description": {
            "short": "Run storage benchmarks and see their results in Teams",
            "full": "Start a benchmark from a catalogue profile on a registered volume, follow "
            "it as it runs, compare it with its series' baseline and get its result in the "
            "chat or channel where you asked. Your Bench.* app role decides what you may run.",
        },
        "icons": {"color": "color.png", "outline": "outline.png"},
        "accentColor": "#{:02X}{:02X}{:02X}".format(*ACCENT),
        "bots": [
            {
                "botId": bot_id,
                "scopes": SCOPES,
                "supportsFiles": False,
                "isNotificationOnly": False,
                "commandLists": [
                    {
                        "scopes": SCOPES,
                        "commands": [{"title": t, "description": d} for t, d in COMMANDS],
                    }
                ],
            }
        ],
        "permissions": ["identity", "messageTeamMembers"],
        "validDomains": [host] if host else [],
    }


def png(size: int, pixel: Any) -> bytes:
    """An RGBA PNG of ``size`` x ``size`` whose pixel (x, y) is ``pixel(x, y)``."""
    rows = b"".join(
        b"\x00" + b"".join(bytes(pixel(x, y)) for x in range(size)) for y in range(size)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


def _bars(size: int, x: int, y: int) -> bool:
    """Three rising bars: a benchmark's chart."""
    unit = size / 8
    for i, height in enumerate((3, 5, 7)):
        left = unit * (1 + 2 * i)
        if (
            left <= x < left + unit * 1.4
            and size - unit * 0.5 - unit * height <= y < size - unit * 0.5
        ):
            return True
    return False


def color_icon() -> bytes:
    white, accent = (255, 255, 255, 255), (*ACCENT, 255)
    return png(192, lambda x, y: white if _bars(192, x, y) else accent)


def outline_icon() -> bytes:
    return png(32, lambda x, y: (255, 255, 255, 255) if _bars(32, x, y) else (0, 0, 0, 0))


def build(bot_id: str, api_url: str, out: Path, version: str = "1.0.0") -> Path:
    if not GUID.match(bot_id):
        raise ValueError(f"--bot-id: {bot_id!r} is not a GUID (the bot's Microsoft App ID)")
    if urlsplit(api_url).scheme != "https" or not urlsplit(api_url).hostname:
        raise ValueError(f"--api-url: {api_url!r} is not an https URL")
    if not re.fullmatch(r"\d{1,3}\.\d{1,3}\.\d{1,3}", version):
        raise ValueError(f"--version: {version!r} is not MAJOR.MINOR.PATCH")
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(
            "manifest.json", json.dumps(manifest(bot_id, api_url.rstrip("/"), version), indent=2)
        )
        z.writestr("color.png", color_icon())
        z.writestr("outline.png", outline_icon())
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bot-id", required=True, help="the Azure Bot's app id (TEAMS_BOT_APP_ID)")
    ap.add_argument("--api-url", required=True, help="the API's https address (API_URL)")
    ap.add_argument("--out", type=Path, default=Path("dist/teams-app.zip"))
    ap.add_argument("--version", default="1.0.0", help="raise it for each upload of a change")
    a = ap.parse_args(argv)
    try:
        path = build(a.bot_id, a.api_url, a.out, a.version)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
