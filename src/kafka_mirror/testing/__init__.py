"""Throw-away real components for the demo, the tests and the benchmark.

Not product code: local KRaft clusters from Maven Central's jars (``localcluster``), a
throw-away MIT Kerberos realm (``localkdc``), stock MirrorMaker 2 (``stock_mm2``) and the
``kafka-mirror demo`` job (``demo``). The mirror itself never imports this package.
"""
