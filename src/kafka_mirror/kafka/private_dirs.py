"""Private temporary directories for secrets the clients need as files (PEM keys converted from
Java key stores, Kerberos credential caches).

Each process gets ``<temp dir>/kafka-mirror-<uid>/<kind>-<pid>-<random>`` (mode 0700, in a
parent of mode 0700 owned by this user), removed when the process exits. A process that
crashed (kill -9, power loss) cannot remove its own: the next start removes every directory
whose process is gone.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import tempfile
from pathlib import Path

from kafka_mirror.errors import MirrorError


def _parent() -> Path:
    """``kafka-mirror-<uid>`` in the temporary directory: ours, 0700, not a link."""
    parent = Path(tempfile.gettempdir()) / f"kafka-mirror-{os.getuid()}"
    try:
        parent.mkdir(mode=0o700, exist_ok=True)
        info = parent.lstat()
    except OSError as exc:
        raise MirrorError(f"{parent}: cannot create the directory for secrets' files: "
                          f"{exc.strerror or exc}") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise MirrorError(f"{parent}: not a private directory of this user (a directory of "
                          "mode 0700 owned by it is needed for secrets' files); remove it")
    return parent


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_left_over(parent: Path) -> list[Path]:
    """Remove the directories of processes that are gone; returns them."""
    removed = []
    for path in parent.iterdir():
        fields = path.name.split("-")
        if len(fields) >= 3 and fields[-2].isdigit() and not _alive(int(fields[-2])):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def private_dir(kind: str) -> Path:
    """A new private directory for this process's ``kind`` of secret files (e.g. ``tls``),
    removed at exit; left-overs of crashed processes are removed first."""
    parent = _parent()
    remove_left_over(parent)
    path = Path(tempfile.mkdtemp(prefix=f"{kind}-{os.getpid()}-", dir=parent))
    os.chmod(path, 0o700)
    atexit.register(shutil.rmtree, path, True)
    return path
