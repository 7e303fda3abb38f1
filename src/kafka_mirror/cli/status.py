"""``kafka-mirror status``: what the running mirror says of its flows (its ``/status``)."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from typing import Any

from kafka_mirror.config.model import MirrorConfig
from kafka_mirror.errors import ConfigError, MirrorError


def status_url(config: MirrorConfig, origin: str) -> str:
    """The running mirror's ``/status``, from ``mirror.metrics.port`` (and bind address)."""
    if config.metrics is None:
        raise ConfigError(
            "the mirror serves its status on its metrics endpoint, which is off: set "
            "mirror.metrics.port (or give --url)", source=origin, key="mirror.metrics.port",
        )
    host = config.metrics.bind_address
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"{config.metrics.scheme}://{host}:{config.metrics.port}/status"


# the password of ``status --user``: from the environment, never from the command line
PASSWORD_ENV = "KAFKA_MIRROR_METRICS_PASSWORD"


def fetch_status(url: str, timeout: float = 5.0, user: str | None = None,
                 password: str = "", cafile: str | None = None) -> dict[str, Any]:
    """The mirror's ``/status`` document; ``user`` and ``password`` for its basic
    authentication, ``cafile`` (PEM) for an HTTPS endpoint whose certificate the system's
    certificate authorities do not sign."""
    request = urllib.request.Request(url)
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    context = ssl.create_default_context(cafile=cafile) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as answer:
            body = answer.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            raise MirrorError(
                f"{url} needs the user and password of mirror.metrics.basic.auth: --user NAME, "
                f"the password in {PASSWORD_ENV}" + (" (not accepted)" if user else "")
            ) from None
        body = exc.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise MirrorError(f"no mirror answers at {url}: {reason}") from None
    try:
        document = json.loads(body)
    except ValueError:
        raise MirrorError(f"{url} did not answer with a kafka-mirror status") from None
    if not isinstance(document, dict) or "flows" not in document:
        raise MirrorError(f"{url} did not answer with a kafka-mirror status")
    return document


def _age(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds:.0f} s ago"


def render(document: dict[str, Any]) -> str:
    """One line for the mirror, then one block per flow."""
    lines = [
        f"mirror: {'live' if document.get('live') else 'NOT LIVE'}, "
        f"{'ready' if document.get('ready') else 'NOT READY'}"
    ]
    for name, flow in sorted(document.get("flows", {}).items()):
        lag = "unknown" if flow.get("lag") is None else f"{flow['lag']} records"
        if flow.get("lag_seconds") is not None:
            lag += f" ({flow['lag_seconds']:.0f} s behind)"
        lines.append(
            f"flow {name}: {flow.get('state')}{'' if flow.get('ready') else ' (not ready)'}; "
            f"lag {lag}; {flow.get('records', 0)} records, "
            f"{flow.get('bytes', 0) / 1e6:.1f} MB mirrored; last batch "
            f"{_age(flow.get('last_batch_age_seconds'))}, {flow.get('rate', 0.0):.0f} records/s; "
            f"{flow.get('restarts', 0)} restarts, {flow.get('errors', 0)} errors"
        )
        lines.append(_lease_line(flow))
        if flow.get("last_error"):
            lines.append(f"  last error: {flow['last_error']}")
    return "\n".join(lines)


def _lease_line(flow: dict[str, Any]) -> str:
    """This instance's role, the flow's lease and its members."""
    role = flow.get("role", "active")
    lease = flow.get("lease")
    if not lease:
        return f"  role: {role} (no lease: mirror.lease.ms = 0, every instance writes the flow)"
    holder = lease.get("holder")
    held = (f"held by {'this instance' if holder == lease.get('this_instance') else holder}"
            if holder else "held by no instance")
    line = (f"  role: {role}; lease epoch {lease.get('epoch')}, {held}, renewed "
            f"{lease.get('lease_age_seconds', 0):.0f} s ago; members: "
            f"{', '.join(lease.get('members_live') or []) or 'none'}")
    lost = lease.get("members_lost") or {}
    if lost:
        line += "; LOST (no clean stop): " + ", ".join(
            f"{member} (unseen {seconds:.0f} s)" for member, seconds in lost.items())
    return line
