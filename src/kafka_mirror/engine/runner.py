"""The mirror process: every enabled flow as its own query, kept in line with its topics."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kafka_mirror.admin import ClusterAdmin
from kafka_mirror.clients import durability_warnings
from kafka_mirror.config.model import FlowSpec, MirrorConfig
from kafka_mirror.engine.batches import BatchHook, event_from_progress, run_hooks
from kafka_mirror.engine.flow_query import OBSERVATION, start_query
from kafka_mirror.engine.positions import FlowState, Positions, starting_offsets
from kafka_mirror.engine.session import build_session, connector_jars, spark_conf
from kafka_mirror.errors import MirrorError
from kafka_mirror.lag import LagCommitter
from kafka_mirror.progress import ProgressReporter
from kafka_mirror.topics import TopicSync

log = logging.getLogger(__name__)
STOP_GRACE_SECONDS = 15.0


class FlowRunner:
    """One flow's query, restarted on a fresh checkpoint generation when its topics change."""

    def __init__(
        self, flow: FlowSpec, state_root: Path, source: ClusterAdmin, target: ClusterAdmin
    ) -> None:
        self.flow = flow
        self.state = FlowState(state_root / flow.path_name)
        self.topics = TopicSync(flow, source, target)
        self.target = target
        self.query: Any = None
        self.assignment: dict[str, int] = {}
        self.next_refresh = 0.0

    def sync_topics(self) -> dict[str, int]:
        """Bring the target topics in line; return the source partitions to mirror."""
        plans = self.topics.plan()
        self.topics.apply(plans)
        self.next_refresh = time.monotonic() + self.flow.refresh_interval_seconds
        return {p.source_topic: p.partitions for p in plans}

    def follow(self, spark: Any, assignment: dict[str, int]) -> None:
        """(Re)start the query when the partitions to mirror changed."""
        if assignment != self.assignment or (assignment and self.query is None):
            if self.assignment:
                log.info("flow %s: topics or partitions changed; restarting", self.flow.name)
            self._restart(spark, assignment)

    def _restart(self, spark: Any, assignment: dict[str, int]) -> None:
        self.stop()
        self.assignment = assignment
        if not assignment:
            log.info("flow %s: no source topic matches yet", self.flow.name)
            return
        known = self.state.last_positions()
        start = starting_offsets(assignment, known, self.flow.starting_offsets)
        checkpoint = self.state.new_generation()
        self.state.prune(keep=checkpoint)
        self.query = start_query(spark, self.flow, assignment, start, checkpoint)
        log.info(
            "flow %s: mirroring %d topics, %d partitions (checkpoint %s)",
            self.flow.name,
            len(assignment),
            sum(assignment.values()),
            checkpoint,
        )

    def target_end(self, source_positions: Positions) -> Positions:
        partitions = sorted({(self.flow.target_topic(t), p) for t, p in source_positions})
        return self.target.end_offsets(partitions)

    def check(self) -> None:
        if self.query is not None and not self.query.isActive:
            error = self.query.exception()
            raise MirrorError(f"flow {self.flow.name} stopped: {error or 'query terminated'}")

    def stop(self) -> None:
        """Stop between batches when possible (a batch cut short is replayed on restart)."""
        query, self.query = self.query, None
        if query is None:
            return
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        while time.monotonic() < deadline and query.isActive:
            if not query.status.get("isTriggerActive", False):
                break
            time.sleep(0.05)
        query.stop()


class _Listener:
    """Routes Spark's progress events to the batch hooks of the flow they belong to."""

    def __init__(self, runners: Mapping[str, FlowRunner], hooks: Sequence[BatchHook]) -> None:
        self.runners = runners
        self.hooks = hooks

    def progress(self, progress: Any) -> None:
        runner = self.runners.get(progress.name)
        if runner is None or not progress.sources:
            return
        event = event_from_progress(runner.flow, progress, OBSERVATION, runner.target_end)
        run_hooks(self.hooks, event)


def _spark_listener(listener: _Listener) -> Any:
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class SparkListener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            listener.progress(event.progress)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    return SparkListener()


class Mirror:
    """Runs a :class:`MirrorConfig` until stopped."""

    def __init__(
        self,
        config: MirrorConfig,
        state_dir: Path,
        cli_spark_conf: Mapping[str, str] | None = None,
        jars_dir: Path | None = None,
        connect_timeout: float = 30.0,
    ) -> None:
        self.config = config
        self.state_dir = state_dir
        self.cli_spark_conf = dict(cli_spark_conf or {})
        self.jars_dir = jars_dir
        self.connect_timeout = connect_timeout

    def connect(self) -> dict[str, ClusterAdmin]:
        """One admin per cluster a flow uses; fails, naming the cluster, within the timeout."""
        used = {f.source.alias for f in self.config.flows} | {
            f.target.alias for f in self.config.flows
        }
        admins = {alias: ClusterAdmin(self.config.clusters[alias]) for alias in sorted(used)}
        for admin in admins.values():
            admin.wait_ready(self.connect_timeout)
        return admins

    def run(self, stop: threading.Event) -> None:
        for notice in self.config.notices:
            log.warning("%s", notice)
        for flow in self.config.flows:
            for warning in durability_warnings(flow):
                log.warning("%s", warning)
        admins = self.connect()
        runners = {
            flow.path_name: FlowRunner(
                flow, self.state_dir, admins[flow.source.alias], admins[flow.target.alias]
            )
            for flow in self.config.flows
        }
        # topic problems surface before Spark starts
        initial = {name: runner.sync_topics() for name, runner in runners.items()}
        conf = spark_conf(
            self.config.spark_conf, self.cli_spark_conf, connector_jars(self.jars_dir)
        )
        spark = build_session(conf)
        lag = LagCommitter()
        spark.streams.addListener(
            _spark_listener(_Listener(runners, [ProgressReporter(), lag]))
        )
        try:
            for name, runner in runners.items():
                runner.follow(spark, initial[name])
            while not stop.wait(1.0):
                for runner in runners.values():
                    runner.check()
                    wanted = runner.flow.refresh_topics or runner.query is None
                    if wanted and time.monotonic() >= runner.next_refresh:
                        runner.follow(spark, runner.sync_topics())
        finally:
            log.info("stopping")
            for runner in runners.values():
                runner.stop()
            lag.close()
            spark.stop()
            log.info("stopped")
