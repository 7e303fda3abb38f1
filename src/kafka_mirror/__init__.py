"""kafka.mirror: mirror Kafka topics between clusters with Spark Structured Streaming."""

from importlib.metadata import PackageNotFoundError, version

try:  # the version the package was built with (pyproject.toml, or the release bundle's)
    __version__ = version("kafka-mirror")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
