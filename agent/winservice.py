"""``python -m agent.winservice --config FILE``: the agent as a Windows service, with no
service wrapper to download.

python.exe is not a service program: the Service Control Manager (SCM) waits for a new
service process to call ``StartServiceCtrlDispatcherW`` and kills it after about 30 s
otherwise (error 1053). This module makes that call through ctypes (advapi32, part of every
Windows), so python.exe itself is the service binary: no NSSM (whose site answers 503 much of
the time) and no pywin32. The protocol (Microsoft Learn, "Service Programs", "Service
ServiceMain Function", "Service Control Handler Function"):

- the dispatcher calls ``ServiceMain`` on a thread of its own; it registers the control
  handler (``RegisterServiceCtrlHandlerExW``) and reports START_PENDING, then RUNNING once the
  agent has its configuration and connections;
- STOP asks the agent to finish its current item and exit (``Worker.request_stop``, as
  SIGTERM does on Linux); the service reports STOP_PENDING with a rising checkpoint until the
  agent is done, then STOPPED. PRESHUTDOWN (the machine is going down) stops it now;
- an agent that exits on its own, or cannot start (a bad configuration: status 2), reports
  STOPPED with ERROR_SERVICE_SPECIFIC_ERROR and its exit status, so the SCM's recovery
  actions (install-agent.ps1 sets them, with the failure flag for non-crash exits) start it
  again.

A service has no console: the log goes to a rotating file (``--log-file``, default
``agent.log`` beside the configuration), and anything printed to stderr with it.
"""

from __future__ import annotations

import ctypes
import logging
import logging.handlers
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

SERVICE_WIN32_OWN_PROCESS = 0x10
SERVICE_STOPPED, SERVICE_START_PENDING, SERVICE_STOP_PENDING, SERVICE_RUNNING = 1, 2, 3, 4
SERVICE_ACCEPT_STOP = 0x1
SERVICE_ACCEPT_PRESHUTDOWN = 0x100
SERVICE_CONTROL_STOP = 0x1
SERVICE_CONTROL_INTERROGATE = 0x4
SERVICE_CONTROL_PRESHUTDOWN = 0xF
NO_ERROR = 0
ERROR_CALL_NOT_IMPLEMENTED = 120
ERROR_SERVICE_SPECIFIC_ERROR = 1066
LOG_BYTES = 10 * 1024 * 1024  # rotated at 10 MiB, 3 files kept
CHECKPOINT_S = 5.0  # while stopping, a rising checkpoint this often, promising the next
WAIT_HINT_MS = 30_000
SERVICE_NAME = "benchagent"


class ServiceStatus(ctypes.Structure):
    """SERVICE_STATUS (winsvc.h): seven DWORDs."""

    _fields_ = [
        ("dwServiceType", ctypes.c_uint32),
        ("dwCurrentState", ctypes.c_uint32),
        ("dwControlsAccepted", ctypes.c_uint32),
        ("dwWin32ExitCode", ctypes.c_uint32),
        ("dwServiceSpecificExitCode", ctypes.c_uint32),
        ("dwCheckPoint", ctypes.c_uint32),
        ("dwWaitHint", ctypes.c_uint32),
    ]


# Where the service's state goes: the SCM (SetServiceStatus), or a test's record.
Reporter = Callable[[ServiceStatus], None]


class Stoppable(Protocol):
    def request_stop(self) -> None: ...


class Runnable(Protocol):
    @property
    def worker(self) -> Stoppable: ...

    def serve(self) -> int: ...


@dataclass
class AgentService:
    """The service's states around one agent, whatever reports them. ``prepare`` reads the
    configuration and connects (agent.__main__.prepare): an agent, or an exit status."""

    report: Reporter
    prepare: Callable[[], Runnable | int]
    checkpoint_s: float = CHECKPOINT_S
    _agent: Runnable | None = None
    _state: int = SERVICE_STOPPED
    _checkpoint: int = 0
    _stopping: threading.Event = field(default_factory=threading.Event)
    _done: threading.Event = field(default_factory=threading.Event)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def _set(self, state: int, *, exit_status: int = 0, only_from: int | None = None) -> None:
        with self._lock:
            if only_from is not None and self._state != only_from:
                return
            self._state = state
            pending = state in (SERVICE_START_PENDING, SERVICE_STOP_PENDING)
            self._checkpoint = self._checkpoint + 1 if pending else 0
            accepts = SERVICE_ACCEPT_STOP | SERVICE_ACCEPT_PRESHUTDOWN
            self.report(
                ServiceStatus(
                    SERVICE_WIN32_OWN_PROCESS,
                    state,
                    accepts if state == SERVICE_RUNNING else 0,
                    ERROR_SERVICE_SPECIFIC_ERROR if exit_status else NO_ERROR,
                    exit_status,
                    self._checkpoint,
                    WAIT_HINT_MS if pending else 0,
                )
            )

    def control(self, code: int) -> int:
        """The control handler (HandlerEx): STOP finishes the current item, PRESHUTDOWN
        stops now. Returns what HandlerEx returns to the SCM."""
        if code == SERVICE_CONTROL_INTERROGATE:
            return NO_ERROR
        if code not in (SERVICE_CONTROL_STOP, SERVICE_CONTROL_PRESHUTDOWN):
            return ERROR_CALL_NOT_IMPLEMENTED
        with self._lock:
            first = not self._stopping.is_set()
            self._stopping.set()
            agent = self._agent
            if first:
                self._set(SERVICE_STOP_PENDING, only_from=SERVICE_RUNNING)
        if agent is not None:
            agent.worker.request_stop()  # first call: after the current item
            if code == SERVICE_CONTROL_PRESHUTDOWN:
                agent.worker.request_stop()  # second call: now
        if first:
            threading.Thread(target=self._pending, name="stop-checkpoint", daemon=True).start()
        return NO_ERROR

    def _pending(self) -> None:
        # The SCM waits for a stopping service as long as its checkpoint rises.
        while not self._done.wait(self.checkpoint_s):
            self._set(SERVICE_STOP_PENDING, only_from=SERVICE_STOP_PENDING)

    def main(self) -> int:
        """ServiceMain's body: start, run until the agent exits, report why. Returns the
        exit status: 0 when it stopped as asked, else the agent's (2: bad configuration)
        or 1 (it ended or failed on its own)."""
        self._set(SERVICE_START_PENDING)
        status = 1
        try:
            prepared = self.prepare()
            if isinstance(prepared, int):
                status = prepared or 1
            else:
                with self._lock:
                    self._agent = prepared
                    stopping = self._stopping.is_set()
                    if not stopping:
                        self._set(SERVICE_RUNNING)
                if stopping:  # asked to stop while it started
                    prepared.worker.request_stop()
                prepared.serve()
                # The agent polls until stopped: ending otherwise is a failure to restart.
                status = 0 if self._stopping.is_set() else 1
        except Exception:
            logging.getLogger("agent").exception("the agent failed")
            status = 1
        finally:
            self._done.set()
        self._set(SERVICE_STOPPED, exit_status=status)
        return status


class _ToLog:
    """A text stream that writes to the log (a service's stderr goes nowhere)."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger

    def write(self, text: str) -> int:
        for line in text.rstrip().splitlines():
            self.logger.error("%s", line)
        return len(text)

    def flush(self) -> None:
        pass


def log_to_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=LOG_BYTES, backupCount=3, encoding="utf-8"
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    sys.stderr = sys.stdout = _ToLog(logging.getLogger("stderr"))


def agent_args(argv: list[str]) -> tuple[list[str], Path]:
    """This module's own ``--log-file PATH`` out of the agent's arguments."""
    args, log_file = list(argv), None
    if "--log-file" in args:
        i = args.index("--log-file")
        log_file = Path(args[i + 1])
        del args[i : i + 2]
    if log_file is None:
        config = args[args.index("--config") + 1] if "--config" in args else "."
        log_file = Path(config).resolve().parent / "agent.log"
    return args, log_file


def run_as_service(argv: list[str]) -> int:  # pragma: no cover - Windows only
    """Hand this process to the SCM: block in the dispatcher until the service stops."""
    from agent.__main__ import prepare

    args, log_file = agent_args(argv)
    log_to_file(log_file)
    win: Any = ctypes  # WinDLL and WINFUNCTYPE exist on Windows only
    advapi = win.WinDLL("advapi32", use_last_error=True)
    handler_type = win.WINFUNCTYPE(
        ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p
    )
    main_type = win.WINFUNCTYPE(None, ctypes.c_uint32, ctypes.POINTER(ctypes.c_wchar_p))
    advapi.RegisterServiceCtrlHandlerExW.restype = ctypes.c_void_p
    advapi.RegisterServiceCtrlHandlerExW.argtypes = [
        ctypes.c_wchar_p,
        handler_type,
        ctypes.c_void_p,
    ]
    advapi.SetServiceStatus.argtypes = [ctypes.c_void_p, ctypes.POINTER(ServiceStatus)]
    handle: list[int] = []

    def report(status: ServiceStatus) -> None:
        if handle and not advapi.SetServiceStatus(handle[0], ctypes.byref(status)):
            logging.getLogger("agent").error("SetServiceStatus: %s", win.get_last_error())

    service = AgentService(report=report, prepare=lambda: prepare(args, log_to_stderr=False))
    outcome: list[int] = []

    def handler_ex(code: int, _event: int, _data: Any, _context: Any) -> int:
        return service.control(code)

    def service_main(_argc: int, _argv: Any) -> None:
        registered = advapi.RegisterServiceCtrlHandlerExW(SERVICE_NAME, handler_c, None)
        if not registered:
            logging.getLogger("agent").error(
                "RegisterServiceCtrlHandlerExW: %s", win.get_last_error()
            )
            return
        handle.append(registered)
        outcome.append(service.main())

    # Kept referenced for the process's life: the SCM calls back into them.
    handler_c, main_c = handler_type(handler_ex), main_type(service_main)

    class TableEntry(ctypes.Structure):
        _fields_ = [("lpServiceName", ctypes.c_wchar_p), ("lpServiceProc", main_type)]

    table = (TableEntry * 2)(TableEntry(SERVICE_NAME, main_c), TableEntry(None, main_type()))
    if not advapi.StartServiceCtrlDispatcherW(table):
        # 1063: not started by the SCM (run from a console): say how to run it instead.
        error = win.get_last_error()
        logging.getLogger("agent").error(
            "StartServiceCtrlDispatcherW failed (%s): run python -m agent in a console", error
        )
        return 1
    return outcome[0] if outcome else 1


if __name__ == "__main__":  # pragma: no cover - Windows only
    sys.exit(run_as_service(sys.argv[1:]))
