"""The metrics endpoint's HTTP server (:mod:`kafka_mirror.observability.server`): an IPv6
bind address, a request timeout for silent clients, and a bounded number of connections (a
flood is closed, the probes still answer)."""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from kafka_mirror.config.model import MetricsSettings
from kafka_mirror.errors import MirrorError
from kafka_mirror.observability import server as endpoint
from kafka_mirror.observability.metrics import MirrorMetrics
from kafka_mirror.observability.server import MetricsServer, MirrorStatus
from kafka_mirror_testing.waiting import wait_for


@contextmanager
def serving(address: str, timeout: float = 10.0) -> Iterator[MetricsServer]:
    metrics = MirrorMetrics()
    server = MetricsServer(MetricsSettings(0, address), metrics, MirrorStatus(metrics),
                           timeout=timeout).start()
    try:
        yield server
    finally:
        server.stop()


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.status, answer.read()


def _answers(url: str) -> bool:
    try:
        return _get(url)[0] == 200
    except OSError:  # closed at once: no slot yet
        return False


def test_an_ipv6_bind_address_listens_on_ipv6() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 in this Python")
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    with serving("::1") as server:
        assert server.url == f"http://[::1]:{server.port}"
        status, body = _get(f"{server.url}/health/live")
        assert status == 200 and b'"live": true' in body


def test_a_bind_address_that_cannot_listen_is_named() -> None:
    with pytest.raises(MirrorError, match=r"cannot listen on 192\.0\.2\.1:0 "
                                          r"\(mirror\.metrics\.port, mirror\.metrics\.bind"):
        MetricsServer(MetricsSettings(0, "192.0.2.1"), MirrorMetrics(),
                      MirrorStatus(MirrorMetrics()))


def test_a_silent_client_is_dropped_after_the_request_timeout() -> None:
    with serving("127.0.0.1", timeout=0.5) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as silent:
            began = time.monotonic()
            assert silent.recv(1024) == b""  # closed by the server, nothing sent
            assert 0.4 < time.monotonic() - began < 5
        assert _get(f"{server.url}/health/live")[0] == 200


def test_a_flood_of_connections_is_bounded_and_the_probes_still_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past WORKERS + WAITING open connections, new ones are closed at once; once the silent
    ones time out, a probe is served again."""
    monkeypatch.setattr(endpoint, "WORKERS", 2)
    monkeypatch.setattr(endpoint, "WAITING", 3)
    with serving("127.0.0.1", timeout=1.0) as server:
        silent = [socket.create_connection(("127.0.0.1", server.port), timeout=10)
                  for _ in range(5)]
        try:
            # every slot taken: the server accepted the 5 silent connections
            wait_for(lambda: not server.httpd.slots.acquire(blocking=False)
                     or server.httpd.slots.release(), 10, "the silent connections accepted",
                     interval=0.05)
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as extra:
                extra.sendall(b"GET /health/live HTTP/1.0\r\n\r\n")
                assert extra.recv(1024) == b""  # closed at once: no slot
            began = time.monotonic()
            wait_for(lambda: _answers(f"{server.url}/health/live"), 10,
                     "a probe served once the silent connections timed out", interval=0.1)
            assert time.monotonic() - began > 0.5
        finally:
            for connection in silent:
                connection.close()


def test_the_mirror_is_live_while_its_main_loop_beats() -> None:
    """Live while starting and while the main loop reported within the live window (it does not
    when a flow's upkeep is overdue: tests/unit/kafka_mirror/runtime/test_flow_workers.py)."""
    status = MirrorStatus(MirrorMetrics())
    assert status.live()  # still starting
    status.beat()
    assert status.live()
    status.loop_ran = time.monotonic() - endpoint.LIVE_WINDOW_SECONDS - 1
    assert not status.live()


def test_a_standby_flow_is_ready_a_starting_one_is_not() -> None:
    from kafka_mirror.observability.metrics import FlowHealth
    from kafka_mirror.observability.server import flow_ready

    assert flow_ready(FlowHealth(state="standby"), time.time())
    assert not flow_ready(FlowHealth(state="starting"), time.time())
