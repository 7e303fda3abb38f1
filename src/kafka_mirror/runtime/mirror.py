"""The mirror process: every enabled flow as its own query, kept in line with its topics, with
the control plane's tasks beside them; what it starts is closed through one teardown."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

from kafka_mirror.config.model import MirrorConfig
from kafka_mirror.config.modes import fit_modes
from kafka_mirror.engine.batches import BatchHook
from kafka_mirror.engine.class_data import CLASS_DATA_DIR, ClassData
from kafka_mirror.engine.session import (
    connector_jars,
    realtime_master,
    spark_conf,
    topic_latency_text,
    wait_for_master,
)
from kafka_mirror.errors import MirrorError, first_line
from kafka_mirror.kafka.admin import ClusterAdmin
from kafka_mirror.kafka.clients import check_data_path_keys, durability_warnings
from kafka_mirror.observability.lag import LagCommitter
from kafka_mirror.observability.metrics import MirrorMetrics
from kafka_mirror.observability.null_metrics import Metrics, NullMetrics
from kafka_mirror.observability.progress import ProgressReporter
from kafka_mirror.observability.server import (
    LIVE_WINDOW_SECONDS,
    RESTART_WINDOW_SECONDS,
    MetricsServer,
    MirrorStatus,
)
from kafka_mirror.runtime.control_plane import ControlPlane
from kafka_mirror.runtime.flow import FlowRunner
from kafka_mirror.runtime.flow_workers import FlowWorker, FlowWorkers
from kafka_mirror.runtime.listener import Listener, spark_listener
from kafka_mirror.runtime.periodic import Periodic
from kafka_mirror.runtime.session_start import SessionStart
from kafka_mirror.runtime.teardown import Teardown

log = logging.getLogger(__name__)


def _stopped_for_good(runners: Mapping[str, FlowRunner]) -> MirrorError:
    return MirrorError(
        "every flow stopped for good: "
        + "; ".join(f"{r.flow.name}: {first_line(r.failed or '')}" for r in runners.values())
    )


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
        self.cli_spark_conf = dict(cli_spark_conf or {})
        # flows in real-time mode by default that a local master has no slot for run
        # micro-batches (kafka_mirror.config.modes)
        self.config = config = fit_modes(config, self.cli_spark_conf)
        served = MirrorMetrics() if config.metrics is not None else None
        self.metrics: Metrics = served if served is not None else NullMetrics()
        self.status = MirrorStatus(served) if served is not None else None
        self.state_dir = state_dir
        self.jars_dir = jars_dir
        self.connect_timeout = connect_timeout

    def connect(self) -> dict[str, ClusterAdmin]:
        """One admin per cluster a flow or a heartbeat uses; fails, naming the cluster, within
        the timeout."""
        used = {f.source.alias for f in self.config.flows} | {
            f.target.alias for f in self.config.flows
        }
        used |= {h.target.alias for h in self.config.heartbeats}
        admins = {alias: ClusterAdmin(self.config.clusters[alias]) for alias in sorted(used)}
        for admin in admins.values():
            admin.wait_ready(self.connect_timeout)
        return admins

    def run(self, stop: threading.Event) -> None:
        """Mirror until ``stop`` is set (or every flow stopped for good), serving the metrics
        endpoint meanwhile when it is configured."""
        with ExitStack() as stack:
            teardown = Teardown.on(stack)
            if self.config.metrics is not None and self.status is not None:
                server = MetricsServer(self.config.metrics, self.status.metrics,
                                       self.status, origin=self.config.origin).start()
                teardown.server.add("metrics server", server.stop)
            self._run(stop, teardown)

    def _run(self, stop: threading.Event, teardown: Teardown) -> None:
        for notice in self.config.notices:
            log.warning("%s", notice)
        for flow in self.config.flows:
            check_data_path_keys(flow)
            for warning in durability_warnings(flow):
                log.warning("%s", warning)
        conf, class_data = self._spark_conf(teardown)
        admins = self.connect()
        # the clusters answer and their client settings hold: the driver's JVM starts while
        # the control plane works, with room for real-time flows' long-running tasks when the
        # configuration has any (kept when all of them stop for good before the first query)
        if any(f.realtime for f in self.config.flows):
            conf = realtime_master(conf)
        early = SessionStart(conf, class_data.driver_launch() if class_data else None)
        teardown.spark.add("Spark session", early.discard)
        runners = self._runners(admins, teardown)
        # internal topics first (a heartbeats topic is mirrored like any topic), then the
        # topic sync: problems surface before the first query starts
        control = ControlPlane(admins, self.config.heartbeats, self.metrics, teardown)
        tasks = control.assemble(runners)
        initial = {name: runner.sync_topics() for name, runner in runners.items()}
        for name, runner in runners.items():
            runner.check_resume(initial[name])
        if all(runner.failed is not None for runner in runners.values()):
            raise _stopped_for_good(runners)
        for task in tasks:
            task.start()
        spark = early.session()
        teardown.spark.add("log", partial(log.info, "stopped"))
        workers = _workers(spark, runners, initial)
        self._stop_flows_at_teardown(runners, workers, teardown)
        control.last_checkpoints_at_stop()
        if class_data is not None:
            class_data.started(spark)
        self._hooks(spark, runners, teardown)
        self._mirror(stop, runners, workers)

    def _spark_conf(self, teardown: Teardown) -> tuple[dict[str, str], ClassData | None]:
        """Spark's settings, once its master answers (an unreachable Spark master fails before
        any cluster is touched); with the class data the driver's JVM shares, if it does."""
        conf = spark_conf(
            self.config.spark_conf, self.cli_spark_conf, connector_jars(self.jars_dir),
            # the plugin also brings real-time mode's copied ranges from executors
            latency_plugin=self.config.metrics is not None
            or any(f.realtime for f in self.config.flows),
        )
        wait_for_master(conf, self.connect_timeout)
        if not self.config.class_data_sharing:
            return conf, None
        class_data = ClassData(self.config.class_data_dir or self.state_dir / CLASS_DATA_DIR)
        teardown.class_data.add("class data", class_data.stop)
        return class_data.spark_conf(conf), class_data

    def _runners(self, admins: Mapping[str, ClusterAdmin], teardown: Teardown
                 ) -> dict[str, FlowRunner]:
        """A runner per flow, each with what it holds open registered for teardown."""
        runners: dict[str, FlowRunner] = {}
        for flow in self.config.flows:
            runner = FlowRunner(flow, self.state_dir, admins, self.config.raw, self.metrics,
                                with_latency=self.config.metrics is not None)
            teardown.flow_state.add(f"{flow.name} offset translation", runner.save_ranges)
            if runner.offset_syncs is not None:
                teardown.flow_state.add_waiting(f"{flow.name} offset syncs",
                                        runner.offset_syncs.close)
            teardown.flow_state.add_waiting(f"{flow.name} target offsets",
                                            partial(_close_target_offsets, runner))
            teardown.flow_state.add_waiting(f"{flow.name} source leader epochs",
                                            runner.close_unclean)
            # once the query stopped: its last positions in Kafka, then the lease (a standby
            # takes the flow over from there at once)
            if runner.kept is not None:
                teardown.handover.add_waiting(f"{flow.name} kept positions", runner.kept.close)
            if runner.lease is not None:
                teardown.handover.add(f"{flow.name} lease", runner.lease.release)
            runners[flow.path_name] = runner
        for runner in runners.values():
            runner.peers = runners
        return runners

    @staticmethod
    def _stop_flows_at_teardown(runners: Mapping[str, FlowRunner], workers: FlowWorkers,
                                teardown: Teardown) -> None:
        """At the stop, every flow finishes its batch at once and starts no query, the upkeep
        under way ends, then each query stops."""
        def begin() -> None:
            log.info("stopping")
            for runner in runners.values():
                runner.closing = True
                runner.begin_stop()
                runner.cut_writes_short()
        teardown.flows.add("flows", begin)
        # an upkeep under way may wait on a cluster (its metadata, the lease): within the
        # stop's budget, which was its own bound of 2 x the grace
        teardown.flows.add_waiting("flow upkeep", workers.close)
        for runner in runners.values():
            teardown.flows.add(f"flow {runner.flow.name}", runner.stop)

    def _hooks(self, spark: Any, runners: Mapping[str, FlowRunner], teardown: Teardown) -> None:
        """Progress (batches, real-time drains) to the progress log, lag commits and metrics."""
        lag = LagCommitter()
        lag_flush = Periodic("lag commits", 1.0, lag.flush_due, 1.0)
        teardown.lag.add_waiting("lag commits", lag_flush.stop)
        teardown.lag.add_waiting("lag committer", lag.close)
        lag_flush.start()
        hooks: list[BatchHook] = [ProgressReporter(), lag, self.metrics]
        self.metrics.read_topic_latency(partial(topic_latency_text, spark))
        for runner in runners.values():
            runner.acked.moved = lag.advance
            runner.realtime.progress_hooks = hooks
        spark.streams.addListener(spark_listener(Listener(runners, hooks)))

    def _mirror(self, stop: threading.Event, runners: Mapping[str, FlowRunner],
                workers: FlowWorkers) -> None:
        """Start the flows, each on its own thread, then keep them running until ``stop`` is
        set: every second each flow's tick is due, and the mirror reports itself live while no
        flow's upkeep is overdue."""
        workers.start()
        self._beat(runners, workers)
        while not stop.wait(1.0):
            workers.poke()
            self._beat(runners, workers)
            if all(runner.failed is not None for runner in runners.values()):
                raise _stopped_for_good(runners)

    def _beat(self, runners: Mapping[str, FlowRunner], workers: FlowWorkers) -> None:
        for runner in runners.values():
            self.metrics.set_state(runner.flow, runner.phase())
            self.metrics.set_lease(runner.flow,
                                   None if runner.lease is None else runner.lease.describe())
        if self.status is not None and workers.healthy():
            self.status.beat()


def _workers(spark: Any, runners: Mapping[str, FlowRunner],
             initial: Mapping[str, dict[str, int]]) -> FlowWorkers:
    """A worker per flow: its first start with the partitions found at the start, then its
    ticks."""
    workers = {name: FlowWorker(name, partial(runner.first_start, spark, initial[name]),
                                partial(runner.tick, spark), partial(getattr, runner, "restarting"))
               for name, runner in runners.items()}
    for name, runner in runners.items():
        if runner.lease is not None:  # a lease taken or lost is acted on at once
            runner.lease.on_change = workers[name].poke
    return FlowWorkers(workers, busy_window=LIVE_WINDOW_SECONDS,
                       restart_window=RESTART_WINDOW_SECONDS)


def _close_target_offsets(runner: FlowRunner, timeout: float) -> None:
    """The target offsets reader of the flow's queries, once one was opened (within
    ``timeout`` seconds)."""
    if runner.target_offsets is not None:
        runner.target_offsets.close(timeout)
