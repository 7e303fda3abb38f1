"""Mirror benchmark: stock MirrorMaker 2 against kafka-mirror, on local loopback clusters.

Two modes, one command (``bench/mirror_benchmark.py`` or ``python -m mirror_bench`` from
``bench/``):

* **throughput** (default): a backlog (``--records``) mirrored by each mirror in turn into a
  fresh destination cluster, timed from process start until all records are there; CPU and RSS
  of each mirror's process tree; the raw produce rate ("ceiling"). See ``throughput``.
* **latency** (``--latency``; ``--smoke`` is a tiny run of it): all mirrors at once, records
  produced at fixed rates, per-record replication latency p50/p99/max side by side; then a topic
  added and partitions added under the running mirrors. See ``latency``.

Modules: ``common`` (names, client tuning), ``workload`` (records, producing), ``clusters``
(local KRaft clusters), ``mm2_driver`` and ``km_driver`` (the two mirrors), ``measures`` (CPU,
RSS, rate), ``latency_probe`` (per-record latency), ``report`` (tables), ``cli``.
Everything started is stopped by PID on exit (also on Ctrl-C and SIGTERM), and the work
directory is removed unless ``--keep`` is given.
"""
