"""The Spark driver's class data archive of the benchmark's kafka-mirror runs
(kafka_mirror.engine.class_data): built once per machine, and again when it no longer matches
the JVM or class path, before anything is measured. Every measured run then starts as a restarted
mirror does, mapping the classes, and none pays for building the archive."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

DIRECTORY = Path.home() / ".cache" / "kafka-mirror" / "bench-class-data"

# A driver JVM that loads what a mirror's driver loads from Spark's own jars (session, SQL,
# streaming, codegen), then builds the archive unless the one there was mapped.
_PRIME = textwrap.dedent("""
    import sys
    from pathlib import Path
    from kafka_mirror.engine.class_data import ClassData, RunningJvm
    from kafka_mirror.engine.session import build_session, connector_jars, spark_conf
    data = ClassData(Path(sys.argv[1]))
    spark = build_session(data.spark_conf(spark_conf({}, {}, connector_jars(None))))
    jvm = RunningJvm.of(spark)
    if data.used_archive and jvm.sharing and data.matches(jvm):
        print("mapped")
    else:
        query = (spark.readStream.format("rate").option("rowsPerSecond", 1000).load()
                 .selectExpr("CAST(value AS STRING) AS value", "timestamp")
                 .writeStream.format("noop").trigger(processingTime="500 milliseconds").start())
        query.processAllAvailable()
        query.awaitTermination(3)
        query.stop()
        print("built" if data.dump(jvm) else "failed")
    data.stop()
    spark.stop()
""")


# The build at the caller's priority: kafka_mirror.engine.class_data builds at the lowest, right
# beside a running mirror, but a caller that waits for nothing else (the test command before its
# tests) saw that build starve past its time limit on a busy machine.
_CALLERS_PRIORITY = "import os\nos.setpriority = lambda *args: None\n"


def prime(directory: Path = DIRECTORY, *, lowest_priority: bool = True) -> str:
    """Make sure ``directory`` holds an archive this machine's driver JVM maps; returns what was
    done ("mapped": it was there; "built"; "failed": the runs go without). The archive is built
    at the lowest CPU priority, as a mirror builds it, unless ``lowest_priority`` is false."""
    began = time.monotonic()
    script = _PRIME if lowest_priority else _CALLERS_PRIORITY + _PRIME
    proc = subprocess.run([sys.executable, "-c", script, str(directory)], capture_output=True,
                          text=True, timeout=1200, check=False)
    lines = proc.stdout.strip().splitlines()
    outcome = lines[-1] if proc.returncode == 0 and lines else "failed"
    print(f"Spark driver class data ({directory}): {outcome} in {time.monotonic() - began:.0f} s",
          flush=True)
    if outcome == "failed":
        print(proc.stderr[-2000:], file=sys.stderr)
    return outcome
