"""What a start imports before the Spark driver's JVM is launched: every module of the command
line's, and nothing it only needs for some configurations (about 90 ms of a 2-core machine's
start went to ``cryptography``, for JKS and PKCS12 stores, and to ``importlib.metadata``, for
the version)."""

from __future__ import annotations

import subprocess
import sys

LATER = ("cryptography", "importlib.metadata", "pyspark")


def test_the_command_line_imports_nothing_a_start_needs_only_later() -> None:
    program = ("import sys, kafka_mirror.cli.main\n"
               f"print(sorted({{m.split('.')[0] if m.startswith('cryptography') else m "
               f"for m in sys.modules if m.startswith({LATER!r})}}))")
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         timeout=60, check=True)
    assert run.stdout.strip() == "[]"


def test_the_version_is_still_there() -> None:
    import kafka_mirror

    assert kafka_mirror.__version__
