"""Secrets' temporary files (PEM keys, Kerberos caches) live in private directories; those a
crashed process left behind are removed at the next start."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kafka_mirror.errors import MirrorError
from kafka_mirror.kafka import private_dirs


def _gone_pid() -> int:
    """The PID of a process that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_new_directory_is_private_and_left_overs_of_gone_processes_are_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    parent = tmp_path / f"kafka-mirror-{os.getuid()}"
    parent.mkdir(mode=0o700)
    crashed = parent / f"tls-{_gone_pid()}-abc_12"
    (crashed / "sub").mkdir(parents=True)
    (crashed / "sub" / "key.pem").write_text("secret")
    running = parent / f"krb5-{os.getppid()}-xyz"  # a process that is alive
    running.mkdir()

    made = private_dirs.private_dir("tls")
    assert made.parent == parent and made.name.startswith(f"tls-{os.getpid()}-")
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert stat.S_IMODE(parent.stat().st_mode) == 0o700
    assert not crashed.exists()
    assert running.exists()


def test_a_parent_others_can_read_is_refused(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    parent = tmp_path / f"kafka-mirror-{os.getuid()}"
    parent.mkdir()
    parent.chmod(0o755)
    with pytest.raises(MirrorError, match=f"{parent}: not a private directory of this user"):
        private_dirs.private_dir("tls")
