"""The live relay: while fio runs, its status outputs (appended to its --output file every
status interval, core.engines.fio_status) are read as they come and turned into small
samples (core.engines.fio_live); the item's next heartbeat carries the last minute of them
to the API, which keeps them as they come (core.runs.live: a write, no read).

It costs no request of its own: the heartbeat goes every second anyway (agent.lease). It
reads only what fio appended since the last read, on the heartbeat's thread; it sends its
ring only when a new sample has come since the last answered beat, and the ring holds at
most LIVE_RING samples, so neither the agent's memory nor a heartbeat's body grows with
the run.
"""

from __future__ import annotations

import codecs
import json
import logging
import threading
from collections import deque
from pathlib import Path

from core.engines.fio_live import LiveSampler
from core.models.live import LIVE_RING, LiveSample

log = logging.getLogger(__name__)
READ_CHUNK = 1 << 20  # a status output with json+ histograms is ~30 kB per direction


class LiveRelay:
    """Tails one fio output file; ``pending`` is its ring of samples when one is new since
    the last heartbeat answered (``sent``), else nothing."""

    def __init__(self, output: Path, *, measured_from_ms: int, io_size: int | None = None) -> None:
        self._path = output
        self._offset = 0
        self._text = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._json = json.JSONDecoder()
        self._sampler = LiveSampler(measured_from_ms, io_size=io_size)
        self._ring: deque[LiveSample] = deque(maxlen=LIVE_RING)
        self._sent_to_ms = 0  # the newest sample an answered heartbeat carried
        self._lock = threading.Lock()

    def _read(self) -> None:
        """What fio appended since the last read, into whole JSON objects (the last one
        may be half written: it waits for the next read)."""
        try:
            with self._path.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read(READ_CHUNK)
        except OSError:
            return  # not written yet
        self._offset += len(chunk)
        self._text += self._decoder.decode(chunk)
        while True:
            start = self._text.find("{")
            if start < 0:
                self._text = ""  # fio's notes before its JSON: not ours to relay
                return
            try:
                doc, end = self._json.raw_decode(self._text, start)
            except json.JSONDecodeError:
                self._text = self._text[start:]
                return
            self._text = self._text[end:]
            if isinstance(doc, dict):
                sample = self._sampler.add(doc)
                if sample is not None:
                    self._ring.append(sample)

    def pending(self) -> list[LiveSample]:
        with self._lock:
            try:
                self._read()
            except Exception:  # crash-only: the live view never ends a heartbeat or an item
                log.exception("live relay: fio's status output not read")
            fresh = self._ring and self._ring[-1].end_ms > self._sent_to_ms
            return list(self._ring) if fresh else []

    def sent(self, samples: list[LiveSample]) -> None:
        with self._lock:
            if samples:
                self._sent_to_ms = max(self._sent_to_ms, samples[-1].end_ms)
