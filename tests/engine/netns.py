"""A network namespace for the mirror process, so that a test can cut its network to one cluster.

The mirror runs inside the namespace; each cluster it talks to gets a veth pair: the root side
holds ``10.79.<n>.1/24`` (an extra listener of the cluster binds there) and the namespace side
``10.79.<n>.2/24``, ``n`` a block of third octets no other namespace on the machine uses (two
test processes with a namespace each, e.g. ``pytest -n 2`` without ``--dist loadgroup``, once
gave both the same addresses, and the mirror's connections went nowhere). Taking the root side
of a link down cuts the mirror off from that cluster silently (packets are dropped, no reset),
while the test itself, in the root namespace, still reaches the cluster on the same address. A
blackhole route for ``10.79.0.0/16`` (higher metric than the links' own routes) stays in place
while any such namespace exists, so no packet for the test subnet can leave by the default route.
The namespace has no default route at all.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
from types import TracebackType

SUBNET = "10.79.0.0/16"
BLACKHOLE_METRIC = "4242"


LINKS_PER_BLOCK = 4
# held while a namespace picks its block and takes its addresses (two test processes at once)
LOCK = os.path.join(tempfile.gettempdir(), "kafka-mirror-netns.lock")


def _ip(*args: str, namespace: str | None = None, check: bool = True) -> str:
    argv = ["ip", *(("-n", namespace) if namespace else ()), *args]
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=30).stdout


def _free_block() -> int:
    """The first third octet of a block of LINKS_PER_BLOCK that no address on the machine's
    root namespace is in."""
    used = _ip("-o", "-4", "addr", "show")
    for first in range(1, 255 - LINKS_PER_BLOCK, LINKS_PER_BLOCK):
        if not any(f"10.79.{first + i}." in used for i in range(LINKS_PER_BLOCK)):
            return first
    raise RuntimeError(f"no free block of addresses in {SUBNET}")


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
        if links > LINKS_PER_BLOCK:
            raise ValueError(f"at most {LINKS_PER_BLOCK} links")
        tag = os.getpid() % 100000
        self.name = f"kmnet{tag}"
        self.links = links
        self._block = 1
        self._root_ends = [f"km{tag}r{i}" for i in range(links)]
        self._ns_ends = [f"km{tag}n{i}" for i in range(links)]

    @property
    def prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]

    def cluster_address(self, link: int) -> str:
        return f"10.79.{self._block + link}.1"

    def __enter__(self) -> MirrorNamespace:
        _ip("route", "replace", "blackhole", SUBNET, "metric", BLACKHOLE_METRIC)
        try:
            with open(LOCK, "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                self._create()
        except BaseException:
            self._teardown()
            raise
        return self

    def _create(self) -> None:
        self._block = _free_block()
        _ip("netns", "add", self.name)
        _ip("link", "set", "lo", "up", namespace=self.name)
        for i, (root, inner) in enumerate(zip(self._root_ends, self._ns_ends, strict=True)):
            _ip("link", "add", root, "type", "veth", "peer", "name", inner, "netns", self.name)
            _ip("addr", "add", f"{self.cluster_address(i)}/24", "dev", root)
            _ip("link", "set", root, "up")
            _ip("addr", "add", f"10.79.{self._block + i}.2/24", "dev", inner,
                namespace=self.name)
            _ip("link", "set", inner, "up", namespace=self.name)

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
        # the blackhole route stays while another test process's namespace exists
        if not any(line.startswith("kmnet") for line in _ip("netns", "list").splitlines()):
            _ip("route", "del", "blackhole", SUBNET, "metric", BLACKHOLE_METRIC, check=False)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._teardown()
