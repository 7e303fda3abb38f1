"""The two forms of the long suites (faults, soak, the unclean election).

The CI form is the test command's default: each fault kind once, short cuts, a soak of a minute
or two. The full form (``KAFKA_MIRROR_FULL=1``, documented in README.md and docs/reliability.md)
adds every variant and runs the long lengths. A test or a parameter that only the full form runs
carries :data:`full_form_only`: the CI form reports it as skipped, naming the full form.
"""

from __future__ import annotations

import os

import pytest

FULL: bool = os.environ.get("KAFKA_MIRROR_FULL", "") not in ("", "0")

# the mode the fault suites' mirrors run in (KAFKA_MIRROR_MODE, in either form): realtime,
# kafka-mirror's default, or micro-batch
MODES = ("realtime", "micro-batch")
MODE: str = os.environ.get("KAFKA_MIRROR_MODE", "") or MODES[0]
if MODE not in MODES:
    raise ValueError(f"KAFKA_MIRROR_MODE={MODE!r}: expected one of {', '.join(MODES)}")

full_form_only = pytest.mark.skipif(not FULL, reason="full form only (KAFKA_MIRROR_FULL=1)")


def in_full_form(*values: object) -> object:
    """A ``pytest.param`` of ``values`` that only the full form runs."""
    return pytest.param(*values, marks=full_form_only)
