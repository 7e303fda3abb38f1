"""Which mode each flow runs in once the Spark master is known.

Real-time mode is the default, and it holds a task slot per group of a flow's partitions for as
long as the flow runs (at least one per flow). A local master of the user's own with fewer task
threads than the flows left in the default mode (``local[1]`` and two flows, as worked before
real-time mode became the default) would fail a flow at its start: those flows run micro-batches
instead, with a notice naming ``spark.master``, and the real-time flows leave a slot for the
micro-batches' tasks. A flow whose ``mirror.mode`` is set keeps it
(and fails naming ``spark.master`` when no slot is free). Masters of other kinds (a Spark
cluster) are left alone: their slots are only known once the session runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from kafka_mirror.config.model import MICRO_BATCH, FlowSpec, MirrorConfig

# Spark's master when none is given: local mode, a task thread per core
DEFAULT_MASTER = "local[*]"
# a local master: local, local[N], local[*], local[N,F], local[*,F] (local-cluster is not: it has
# executors of its own)
LOCAL_MASTER = re.compile(r"local(?:\[(?P<threads>[^\],]*)(?:,[^\]]*)?\])?")
# the task threads local mode runs for real-time flows when the master is local[*]
# (kafka_mirror.engine.session.realtime_master)
REALTIME_LOCAL_SLOTS = 32


def local_slots(master: str) -> int | None:
    """The task threads of a local master (``local[*]``: what real-time flows get), None for
    any other master."""
    match = LOCAL_MASTER.fullmatch(master.strip())
    if match is None:
        return None
    threads = match["threads"]
    if threads is None:
        return 1
    if threads.strip() == "*":
        return REALTIME_LOCAL_SLOTS
    try:
        return max(1, int(threads))
    except ValueError:
        return None  # Spark refuses it, naming the master


def fit_modes(config: MirrorConfig, cli_spark_conf: Mapping[str, str] | None = None
              ) -> MirrorConfig:
    """``config`` with the flows its local Spark master (the command line's, the file's or the
    default) has no task slot for in real-time mode running micro-batches instead, if they are
    in real-time mode by default only."""
    master = {**config.spark_conf, **(cli_spark_conf or {})}.get("spark.master", DEFAULT_MASTER)
    slots = local_slots(master)
    realtime = [flow for flow in config.flows if flow.realtime]
    if slots is None or len(realtime) <= slots - _micro_batch_slot(config.flows):
        return config
    # a flow moved runs micro-batches, whose tasks need a slot the real-time flows leave free
    excess = len(realtime) - (slots - 1)
    why = (f"spark.master {master} has {slots} task slot{'s' if slots > 1 else ''} for "
           f"{len(realtime)} real-time flows")
    flows = list(config.flows)
    moved = []
    for index in reversed(range(len(flows))):
        flow = flows[index]
        if excess and flow.realtime and flow.mode_reason:
            flows[index] = replace(flow, mode=MICRO_BATCH, mode_reason=why)
            moved.append(flow.name)
            excess -= 1
    if not moved:
        return config
    notice = (f"{why}: {', '.join(sorted(moved))} run{'s' if len(moved) == 1 else ''} in "
              "micro-batch mode (set mirror.mode, or give Spark a task slot per real-time flow)")
    return replace(config, flows=tuple(flows), notices=(*config.notices, notice))


def _micro_batch_slot(flows: Sequence[FlowSpec]) -> int:
    """The task slot micro-batch flows need beside the real-time flows' (1 if there are any):
    their batches' tasks would wait for a real-time batch's end otherwise."""
    return 1 if any(not flow.realtime for flow in flows) else 0
