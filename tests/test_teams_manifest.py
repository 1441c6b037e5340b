"""The Teams app package (scripts/teams_manifest.py) as an admin uploads it: a zip with the
manifest naming the bot, its scopes and commands, and the two icons Teams requires."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

from core.chat.bot import HELP, parse_command
from core.chat.teams_bot import SUBSCRIBE_HELP

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "teams_manifest.py"
BOT_ID = "7f3b0c9e-5a41-4a8e-9d2c-1b6e0f4a2c11"
API = "https://func-bench-abc.azurewebsites.net"


def build(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path / "app.zip"), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and the RGBA rows of an 8-bit RGBA PNG (filter 0 rows)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        crc = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])[0]
        assert zlib.crc32(kind + body) == crc
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert (depth, colour) == (8, 6)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = 1 + 4 * width
    rows = [raw[i * stride + 1 : (i + 1) * stride] for i in range(height)]
    return width, height, rows


def test_the_package_names_the_bot_in_every_scope_with_its_commands(tmp_path: Path) -> None:
    r = build(tmp_path, "--bot-id", BOT_ID, "--api-url", API)
    assert r.returncode == 0, r.stderr
    with zipfile.ZipFile(tmp_path / "app.zip") as z:
        assert sorted(z.namelist()) == ["color.png", "manifest.json", "outline.png"]
        m = json.loads(z.read("manifest.json"))
        color, outline = z.read("color.png"), z.read("outline.png")
    assert m["manifestVersion"] == "1.17" and m["version"] == "1.0.0"
    (bot,) = m["bots"]
    assert bot["botId"] == BOT_ID
    assert set(bot["scopes"]) == {"personal", "team", "groupChat"}
    assert m["validDomains"] == ["func-bench-abc.azurewebsites.net"]
    assert all(m["developer"][k].startswith("https://") for k in ("websiteUrl", "privacyUrl"))
    assert len(m["name"]["short"]) <= 30 and len(m["description"]["short"]) <= 80
    commands = bot["commandLists"][0]["commands"]
    assert len(commands) <= 10
    # Each command in the menu is one the bot reads (the help text lists the same).
    helped = " ".join([*HELP, SUBSCRIBE_HELP])
    for c in commands:
        assert c["title"] in helped, c["title"]
        assert len(c["description"]) <= 128
    assert (
        parse_command("status r-1").verb == "status"
        and parse_command("cancel r-1").verb == "cancel"
    )
    # Teams' icon rules: 192 x 192 colour; 32 x 32 outline, white on transparent only.
    assert pixels(color)[:2] == (192, 192)
    w, h, rows = pixels(outline)
    assert (w, h) == (32, 32)
    seen = {rows[y][x * 4 : x * 4 + 4] for y in range(h) for x in range(w)}
    assert seen == {b"\xff\xff\xff\xff", b"\x00\x00\x00\x00"}
    # The same bot gives the same app id: a new upload updates the app.
    build(tmp_path, "--bot-id", BOT_ID, "--api-url", API, "--version", "1.0.1")
    with zipfile.ZipFile(tmp_path / "app.zip") as z:
        again = json.loads(z.read("manifest.json"))
    assert again["id"] == m["id"] and again["version"] == "1.0.1"


def test_bad_arguments_exit_2_naming_the_option(tmp_path: Path) -> None:
    r = build(tmp_path, "--bot-id", "not-a-guid", "--api-url", API)
    assert r.returncode == 2 and "--bot-id" in r.stderr
    r = build(tmp_path, "--bot-id", BOT_ID, "--api-url", "http://insecure")
    assert r.returncode == 2 and "--api-url" in r.stderr
    assert not (tmp_path / "app.zip").exists()
