"""The mirror's HTTP endpoint: ``/metrics`` (Prometheus), ``/health/live``, ``/health/ready``
(as Strimzi gives MirrorMaker its probes) and ``/status`` (JSON, read by ``kafka-mirror status``).

- live: the mirror is still starting (connecting, syncing topics, starting Spark), or its main
  loop reported within :data:`LIVE_WINDOW_SECONDS` that no flow's upkeep is overdue (each flow's
  query is started, watched and restarted on a thread of its own: a call stuck for longer than
  the live window, or a query restart longer than :data:`RESTART_WINDOW_SECONDS` (the batch
  being written finishes, what a cut batch left on the target is read back), is overdue).
- ready: every flow runs a query and either committed a batch that moved records, or reported an
  idle trigger with nothing left to mirror, within :data:`READY_WINDOW_SECONDS`, or stands by
  (another instance holds its lease: this one is ready to take it over); a flow stopped for good
  is never ready.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kafka_mirror.config.model import MetricsSettings
from kafka_mirror.errors import MirrorError
from kafka_mirror.observability.endpoint_security import REALM, BasicAuthCheck, server_context
from kafka_mirror.observability.metrics import FlowHealth, MirrorMetrics

log = logging.getLogger(__name__)
LIVE_WINDOW_SECONDS = 30.0
RESTART_WINDOW_SECONDS = 600.0
READY_WINDOW_SECONDS = 60.0
# a connection that sends no complete request within this time is closed
REQUEST_TIMEOUT_SECONDS = 10.0
# requests served at once; connections beyond WORKERS + WAITING are closed at once
WORKERS = 4
WAITING = 32


def flow_ready(health: FlowHealth, now: float) -> bool:
    if health.state == "standby":
        return True
    if health.state != "running":
        return False
    recent_batch = health.last_batch is not None and now - health.last_batch <= \
        READY_WINDOW_SECONDS
    idle_caught_up = (
        health.lag == 0 and health.last_progress is not None
        and now - health.last_progress <= READY_WINDOW_SECONDS
    )
    return recent_batch or idle_caught_up


class MirrorStatus:
    """Health and per-flow status of the running mirror, from its metrics."""

    def __init__(self, metrics: MirrorMetrics) -> None:
        self.metrics = metrics
        self.loop_ran: float | None = None  # None: still starting

    def beat(self) -> None:
        """The main loop ran and found no flow's upkeep overdue."""
        self.loop_ran = time.monotonic()

    def live(self) -> bool:
        return self.loop_ran is None or time.monotonic() - self.loop_ran <= LIVE_WINDOW_SECONDS

    def report(self) -> dict[str, Any]:
        now = time.time()
        flows: dict[str, Any] = {}
        for name, flow in sorted(self.metrics.snapshot().items()):
            entry = asdict(flow)
            entry["ready"] = flow_ready(flow, now)
            entry["last_batch_age_seconds"] = (
                round(now - flow.last_batch, 1) if flow.last_batch is not None else None
            )
            flows[name] = entry
        ready = bool(flows) and all(f["ready"] for f in flows.values())
        return {"live": self.live(), "ready": ready, "flows": flows}


def _handler(metrics: MirrorMetrics, status: MirrorStatus, request_timeout: float,
             auth: BasicAuthCheck | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # the socket's timeout (StreamRequestHandler.setup): a silent client is dropped
        timeout = request_timeout

        def do_GET(self) -> None:
            # every path, the probes too (as the JMX exporter and Prometheus' exporters do)
            if auth is not None and not auth.accepts(self.headers.get("Authorization")):
                self.send_response(401)
                self.send_header("WWW-Authenticate", f'Basic realm="{REALM}", charset="UTF-8"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            path = self.path.split("?", 1)[0].rstrip("/")
            if path == "/metrics":
                self._send(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
                return
            if path in ("/health/live", "/health/ready", "/status"):
                report = status.report()
                ok = {"/health/live": report["live"], "/health/ready": report["ready"],
                      "/status": True}[path]
                body = json.dumps(report, indent=1, sort_keys=True).encode()
                self._send(200 if ok else 503, body, "application/json")
                return
            self._send(404, b"not found: try /metrics, /health/live, /health/ready, /status\n",
                       "text/plain")

        def _send(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("metrics endpoint: " + format, *args)

    return Handler


class _BoundedHTTPServer(HTTPServer):
    """Requests served by :data:`WORKERS` threads; connections past :data:`WAITING` waiting
    ones are closed at once (a flood of connections cannot start a thread each)."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 tls: ssl.SSLContext | None = None, handshake_timeout: float = 10.0) -> None:
        # an IPv6 address (``::``, ``::1``) listens on IPv6
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="metrics-endpoint")
        self.slots = threading.BoundedSemaphore(WORKERS + WAITING)
        self.tls = tls
        self.handshake_timeout = handshake_timeout
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            log.debug("metrics endpoint: %d connections open; %s closed", WORKERS + WAITING,
                      client_address)
            self.shutdown_request(request)
            return
        self.pool.submit(self._serve, request, client_address)

    def _serve(self, request: Any, client_address: Any) -> None:
        try:
            if self.tls is not None:
                # the handshake in this worker, not in the accepting thread: a client that
                # stalls it holds one worker for the request timeout, never the endpoint
                request.settimeout(self.handshake_timeout)
                request = self.tls.wrap_socket(request, server_side=True)
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("metrics endpoint: request from %s failed", client_address, exc_info=True)

    def server_close(self) -> None:
        super().server_close()
        self.pool.shutdown(wait=False, cancel_futures=True)


class MetricsServer:
    """Serves the endpoint from a daemon thread until :meth:`stop`."""

    def __init__(self, settings: MetricsSettings, metrics: MirrorMetrics,
                 status: MirrorStatus, timeout: float = REQUEST_TIMEOUT_SECONDS,
                 origin: str = "mm2.properties") -> None:
        self.scheme = settings.scheme
        tls = None if settings.tls is None else server_context(settings.tls, origin)
        auth = None if settings.basic_auth is None else BasicAuthCheck(settings.basic_auth)
        try:
            self.httpd = _BoundedHTTPServer(
                (settings.bind_address, settings.port), _handler(metrics, status, timeout, auth),
                tls, timeout,
            )
        except (OSError, OverflowError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise MirrorError(
                f"metrics endpoint cannot listen on {settings.bind_address}:{settings.port} "
                f"(mirror.metrics.port, mirror.metrics.bind.address): {reason}"
            ) from None
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="metrics-endpoint",
                                       daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        host = str(self.httpd.server_address[0])
        return f"{self.scheme}://{f'[{host}]' if ':' in host else host}:{self.port}"

    def start(self) -> MetricsServer:
        self.thread.start()
        log.info("metrics endpoint on %s/metrics (health: /health/live, /health/ready; status: "
                 "/status)", self.url)
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
