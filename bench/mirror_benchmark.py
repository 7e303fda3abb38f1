"""Mirror benchmark: stock MirrorMaker 2 against kafka-mirror, on local loopback clusters.

The entry point of the ``mirror_bench`` package beside this file (see its docstring and
docs/benchmarks.md). Throughput mode (default)::

    .venv/bin/python bench/mirror_benchmark.py [--records N] [--record-size 1024] \
        [--partitions 8] [--rounds 1] [--json FILE] [--keep]

Latency mode (all mirrors at once, fixed rates, per-record latency, topic changes)::

    .venv/bin/python bench/mirror_benchmark.py --latency [--rates 1000,5000,20000] \
        [--duration 60] [--json FILE]

``--smoke`` is a tiny latency run that checks that the benchmark works (tests/engine runs it).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mirror_bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
