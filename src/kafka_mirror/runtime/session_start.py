"""The Spark session, started in a thread of its own while the control plane works."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from kafka_mirror.engine.driver_launch import DriverLaunch
from kafka_mirror.engine.session import build_session


class SessionStart:
    """The Spark session, started in a thread of its own while the control plane works (a
    session built outside the main thread also leaves the mirror's SIGINT handler alone)."""

    def __init__(self, conf: Mapping[str, str], launch: DriverLaunch | None = None) -> None:
        """``launch``: the driver's launch commands kept between starts (none: through
        ``spark-submit`` every time)."""
        self._spark: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._build, args=(dict(conf), launch),
                                        name="spark-session-start", daemon=True)
        self._thread.start()

    def _build(self, conf: dict[str, str], launch: DriverLaunch | None) -> None:
        try:
            self._spark = build_session(conf, launch)
        except BaseException as exc:
            self._error = exc

    def session(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._spark

    def discard(self) -> None:
        """Stop the session once it started (whether or not the mirror got to use it)."""
        self._thread.join()
        if self._spark is not None:
            self._spark.stop()
