"""The live relay: while fio runs, its status outputs (appended to its --output file every
status interval, core.engines.fio_status) are read as they come and turned into small
samples (core.engines.fio_live) that the item's next heartbeat carries to the API.

It costs no request of its own: the heartbeat goes every second anyway (agent.lease). It
reads only what fio appended since the last read, on the heartbeat's thread, and keeps at
most MAX_SAMPLES_PER_BEAT samples waiting (the oldest dropped while the API does not
answer), so neither the agent's memory nor a heartbeat's body grows with the run.
"""

from __future__ import annotations

import codecs
import json
import logging
import threading
from collections import deque
from pathlib import Path

from core.engines.fio_live import LiveSampler
from core.models.live import LiveSample
from core.runs.live import MAX_SAMPLES_PER_BEAT

log = logging.getLogger(__name__)
READ_CHUNK = 1 << 20  # a status output with json+ histograms is ~30 kB per direction


class LiveRelay:
    """Tails one fio output file; ``pending`` samples go with the next heartbeat and are
    dropped once it is answered (``sent``)."""

    def __init__(self, output: Path, *, measured_from_ms: int) -> None:
        self._path = output
        self._offset = 0
        self._text = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._json = json.JSONDecoder()
        self._sampler = LiveSampler(measured_from_ms)
        self._pending: deque[LiveSample] = deque(maxlen=MAX_SAMPLES_PER_BEAT)
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
                    self._pending.append(sample)

    def pending(self) -> list[LiveSample]:
        with self._lock:
            try:
                self._read()
            except Exception:  # crash-only: the live view never ends a heartbeat or an item
                log.exception("live relay: fio's status output not read")
            return list(self._pending)

    def sent(self, samples: list[LiveSample]) -> None:
        with self._lock:
            for s in samples:
                if s in self._pending:
                    self._pending.remove(s)
