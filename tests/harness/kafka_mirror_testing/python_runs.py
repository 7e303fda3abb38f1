"""A Python script run in a process of its own (one Spark driver JVM per process, as the mirror
has), whose last line of output is a JSON object: the test's measurements."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys


def run_json_script(script: str, *args: str, timeout: float = 600.0) -> dict[str, object]:
    """Run ``script`` with ``args`` in a session of its own and return the JSON object its last
    line of output holds; on a timeout the whole process group goes (JVMs it started
    included), and a failure shows the end of its stderr."""
    with subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise AssertionError(f"{args} took over {timeout:.0f} s:\n{err[-3000:]}") from None
    assert proc.returncode == 0, err[-3000:]
    return dict(json.loads(out.strip().splitlines()[-1]))
