"""Throw-away real components for the demo, the tests and the benchmark.

Not product code, and not in the kafka-mirror wheel: local KRaft clusters from Maven Central's
jars (``localcluster``), a throw-away MIT Kerberos realm (``localkdc``), stock MirrorMaker 2
(``stock_mm2``) and the demo job (``demo``, the ``kafka-mirror-demo`` command); and what the tests
share: writing records with every delivery checked (``records``), waiting for a condition instead
of sleeping (``waiting``), ACL bindings and a flow to plan them for (``acls``). Installed into the
development virtualenv by ``scripts/setup.sh`` (``tests/harness/pyproject.toml``); the mirror
itself never imports this package.
"""
