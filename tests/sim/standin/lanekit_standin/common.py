"""Runtime pieces shared by both stand-in engines: output, environment knobs, fault injection,
signals and interruptible waits. Pure stdlib (Python 3.11)."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

GiB = 1 << 30
MiB = 1 << 20

# Phases in the order a rank goes through them (docs/contracts.md).
PHASES = ("rendezvous", "load", "barrier", "profile", "capture", "warmup", "serve")

_OUT_LOCK = threading.RLock()


def emit(line: str, stream=None) -> None:
    """Print one line and flush it at once (containers capture stdout; nothing may sit in a
    buffer when a rank dies)."""
    stream = stream or sys.stdout
    with _OUT_LOCK:
        try:
            stream.write(line + "\n")
            stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass


def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip()


def env_float(name: str, default: float | None) -> float | None:
    raw = env_str(name)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        emit(f"[lanekit stand-in] ignoring {name}={raw!r}: not a number", sys.stderr)
        return default


def env_int(name: str, default: int | None) -> int | None:
    value = env_float(name, None)
    return default if value is None else int(value)


def rank_matches(spec: str | None, rank: int) -> bool:
    """`STANDIN_*_RANK` accepts one rank, a comma list, or `all` / `*`."""
    if spec is None:
        return False
    spec = spec.strip().lower()
    if spec in ("all", "*"):
        return True
    for part in spec.split(","):
        part = part.strip()
        if part.lstrip("-").isdigit() and int(part) == rank:
            return True
    return False


class Fatal(Exception):
    """A rank fails: print `lines` (the engine's error output) and exit with `code`."""

    def __init__(self, lines, code: int = 1):
        if isinstance(lines, str):
            lines = [lines]
        super().__init__(lines[-1] if lines else "fatal")
        self.lines = list(lines)
        self.code = code


class Shutdown(Exception):
    """SIGTERM/SIGINT: leave cleanly."""


class Runtime:
    """Process state shared by the main thread (which walks the phases) and the helper threads
    (rendezvous readers, HTTP). Every wait of the main thread goes through `sleep`/`wait_for`,
    which wake up at least every 0.2 s to notice a failure reported by another thread or a
    termination signal."""

    SLICE = 0.2

    def __init__(self, node_rank: int = 0):
        self.node_rank = node_rank
        self.cond = threading.Condition(threading.RLock())
        self._fatal: Fatal | None = None
        self.term_signals = 0          # count of SIGTERM/SIGINT received
        self.defer_term = False        # SGLang workers: SIGTERM only logs and waits
        self.started = time.monotonic()

    # --- failures reported by helper threads -------------------------------------------------
    def fail(self, lines, code: int = 1) -> None:
        with self.cond:
            if self._fatal is None:
                self._fatal = Fatal(lines, code)
            self.cond.notify_all()

    def check(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        if self.term_signals and not self.defer_term:
            raise Shutdown()

    def notify(self) -> None:
        with self.cond:
            self.cond.notify_all()

    # --- waits -----------------------------------------------------------------------------
    def sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + max(0.0, seconds)
        while True:
            self.check()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            with self.cond:
                self.cond.wait(min(self.SLICE, left))

    def wait_for(self, predicate, timeout: float | None) -> bool:
        """Wait until predicate() is true (True) or the timeout passes (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.check()
            with self.cond:
                if predicate():
                    return True
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self.cond.wait(min(self.SLICE, left))
                else:
                    self.cond.wait(self.SLICE)

    def hang(self) -> None:
        """Stop making progress; stay alive and answer signals."""
        while True:
            self.sleep(3600)

    # --- signals ---------------------------------------------------------------------------
    def install_signals(self) -> None:
        def handler(signum, frame):  # noqa: ARG001
            # Only flip a counter here: the main thread notices it within SLICE seconds.
            self.term_signals += 1

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, handler)


class Faults:
    """Fault injection from the environment (read by the stand-ins only):

    STANDIN_FAULT_RANK / STANDIN_FAULT_PHASE / STANDIN_FAULT_LINE: that rank prints the line
        and exits 1 when it reaches the phase.
    STANDIN_HANG_RANK / STANDIN_HANG_PHASE: that rank stops making progress at the phase.
    """

    DEFAULT_LINE = "RuntimeError: lanekit stand-in: fault injected by STANDIN_FAULT_* at phase {phase}"

    def __init__(self, node_rank: int):
        self.node_rank = node_rank
        self.fault_phase = (env_str("STANDIN_FAULT_PHASE") or "").lower() or None
        self.fault_rank = env_str("STANDIN_FAULT_RANK", "0" if self.fault_phase else None)
        self.fault_line = env_str("STANDIN_FAULT_LINE")
        self.hang_phase = (env_str("STANDIN_HANG_PHASE") or "").lower() or None
        self.hang_rank = env_str("STANDIN_HANG_RANK", "0" if self.hang_phase else None)
        for name, phase in (("STANDIN_FAULT_PHASE", self.fault_phase), ("STANDIN_HANG_PHASE", self.hang_phase)):
            if phase and phase not in PHASES:
                emit(f"[lanekit stand-in] {name}={phase!r} names no phase (one of: {', '.join(PHASES)})", sys.stderr)

    def fault_here(self, phase: str) -> bool:
        return self.fault_phase == phase and rank_matches(self.fault_rank, self.node_rank)

    def hang_here(self, phase: str) -> bool:
        return self.hang_phase == phase and rank_matches(self.hang_rank, self.node_rank)

    def fault_lines(self, phase: str) -> list[str]:
        line = self.fault_line or self.DEFAULT_LINE.format(phase=phase)
        return [
            "Traceback (most recent call last):",
            f'  File "<lanekit stand-in: STANDIN_FAULT_PHASE={phase}>", line 1, in <module>',
            line,
        ]


def phase_seconds() -> float:
    """STANDIN_PHASE_S: seconds spent in each post-load phase (default 1)."""
    return max(0.0, env_float("STANDIN_PHASE_S", 1.0))


def fmt_thousands(n: int) -> str:
    return f"{n:,}"
