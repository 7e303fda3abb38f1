"""kafka.mirror: mirror Kafka topics between clusters with Spark Structured Streaming."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """``__version__``: the version the package was built with (pyproject.toml, or the release
    bundle's), looked up when asked for: ``importlib.metadata`` costs about 25 ms, which a start
    would otherwise spend before the Spark driver's JVM is launched."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kafka-mirror")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"
