"""One mirror per state directory: an exclusive lock held for the life of the process.

``kafka-mirror run`` (and ``legacy``) take it before anything reads or writes the state
directory. Two mirrors on one state directory would write the same Spark checkpoints and
offset ranges; the second one stops at once, naming the directory and the holder's PID, and
touches nothing. The lock is ``flock`` on ``<state dir>/.lock``: the kernel drops it when the
holder exits, however it exits (kill -9 included), so a stale lock file never blocks a start.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from kafka_mirror.errors import MirrorError

LOCK_NAME = ".lock"


class StateDirError(MirrorError):
    """The state directory cannot be used: not creatable, not writable, or in use."""


class StateDirLock:
    """The exclusive lock on a state directory (created if missing)."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.path = state_dir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> StateDirLock:
        """Take the lock or raise :class:`StateDirError`; never waits."""
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StateDirError(
                f"state directory {self.state_dir} cannot be used: "
                f"{exc.strerror or exc} ({exc.filename or self.path})"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"process {holder}" if holder else "another process"
            raise StateDirError(
                f"state directory {self.state_dir} is in use by {who} (lock {self.path}): "
                "one mirror per state directory; stop that one or pick another --state-dir"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise StateDirError(
                f"state directory {self.state_dir}: cannot lock {self.path}: {exc.strerror}"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing the descriptor drops the lock
            self._fd = None

    def __enter__(self) -> StateDirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
