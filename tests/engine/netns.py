"""A network namespace for the mirror process, so that a test can cut its network to one cluster.

The mirror runs inside the namespace; each cluster it talks to gets a veth pair: the root side
holds ``10.79.<i>.1/24`` (an extra listener of the cluster binds there) and the namespace side
``10.79.<i>.2/24``. Taking the root side of a link down cuts the mirror off from that cluster
silently (packets are dropped, no reset), while the test itself, in the root namespace, still
reaches the cluster on the same address. A blackhole route for ``10.79.0.0/16`` (higher metric
than the links' own routes) stays in place while the namespace exists, so no packet for the test
subnet can leave by the default route. The namespace has no default route at all.
"""

from __future__ import annotations

import os
import subprocess
from types import TracebackType

SUBNET = "10.79.0.0/16"
BLACKHOLE_METRIC = "4242"


def _ip(*args: str, namespace: str | None = None, check: bool = True) -> None:
    argv = ["ip", *(("-n", namespace) if namespace else ()), *args]
    subprocess.run(argv, check=check, capture_output=True, timeout=30)


def available() -> str | None:
    """None when network namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"kmprobe{os.getpid() % 100000}"
    result = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        return f"ip netns add failed: {result.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


class MirrorNamespace:
    """``with MirrorNamespace(links=2) as ns``: ``ns.cluster_address(i)`` for a cluster's
    listener, ``ns.prefix`` to run a command inside, ``ns.cut(i)`` / ``ns.restore(i)``."""

    def __init__(self, links: int) -> None:
        tag = os.getpid() % 100000
        self.name = f"kmnet{tag}"
        self.links = links
        self._root_ends = [f"km{tag}r{i}" for i in range(links)]
        self._ns_ends = [f"km{tag}n{i}" for i in range(links)]

    @property
    def prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]

    @staticmethod
    def cluster_address(link: int) -> str:
        return f"10.79.{link + 1}.1"

    def __enter__(self) -> MirrorNamespace:
        _ip("route", "replace", "blackhole", SUBNET, "metric", BLACKHOLE_METRIC)
        try:
            _ip("netns", "add", self.name)
            _ip("link", "set", "lo", "up", namespace=self.name)
            for i, (root, inner) in enumerate(zip(self._root_ends, self._ns_ends, strict=True)):
                _ip("link", "add", root, "type", "veth", "peer", "name", inner,
                    "netns", self.name)
                _ip("addr", "add", f"{self.cluster_address(i)}/24", "dev", root)
                _ip("link", "set", root, "up")
                _ip("addr", "add", f"10.79.{i + 1}.2/24", "dev", inner, namespace=self.name)
                _ip("link", "set", inner, "up", namespace=self.name)
        except BaseException:
            self._teardown()
            raise
        return self

    def cut(self, link: int) -> None:
        """Drop every packet between the mirror and the cluster on ``link``."""
        _ip("link", "set", self._root_ends[link], "down")

    def restore(self, link: int) -> None:
        _ip("link", "set", self._root_ends[link], "up")

    def _teardown(self) -> None:
        # callers stop every process inside first (their sockets close with them)
        for root in self._root_ends:
            _ip("link", "del", root, check=False)
        _ip("netns", "del", self.name, check=False)
        _ip("route", "del", "blackhole", SUBNET, "metric", BLACKHOLE_METRIC, check=False)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._teardown()
