"""What the harness's throw-away processes (clusters, KDC, stock MM2) share: ``with`` starts one
and stops it after."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class Service(ABC):
    """A process the tests start and stop; as a context manager, started on entry and stopped on
    exit (also when the block fails)."""

    @abstractmethod
    def start(self) -> Self:
        """Start the process (with each service's own defaults) and return the service."""

    @abstractmethod
    def stop(self) -> object:
        """Stop the process."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
