"""Kerberos (SASL GSSAPI) keytab logins for the control plane (librdkafka).

librdkafka (with Cyrus SASL) logs in by running ``kinit`` and then takes its tickets from the
process's default credential cache. Two consequences shape this module:

- A failed ``kinit`` is only logged by librdkafka, and when the cache already holds a ticket
  (from an earlier login or someone's interactive ``kinit``) the client authenticates with that
  one. So each keytab login is first done here, with ``kinit``'s own message turned into an error
  naming the cluster.
- Without ``KRB5CCNAME`` the default cache is the user's (``/tmp/krb5cc_<uid>``). For keytab
  logins the process gets a private cache instead (in a private temporary directory, removed at
  exit); a ``KRB5CCNAME`` set by the user is kept.

One process has one default cache, so two *different* keytab principals (say one per cluster)
share it. The private cache is therefore a cache *collection* (``DIR:``), which holds one cache
per principal: ``kinit`` puts each principal's tickets into a cache of its own, and MIT Kerberos
picks, for every connection, the cache whose realm is the broker's realm (the ``realm`` ccselect
module; the broker's realm comes from ``[domain_realm]`` of krb5.conf, else the default realm).
So one principal per cluster works when the clusters are in different realms. Two principals of
one realm cannot be told apart that way (nor any two with a ``KRB5CCNAME`` that is a single
``FILE:`` cache): new connections may present either, and :func:`keytab_login` returns a warning
for that case. The Spark side (Java clients) is not affected: each JAAS line logs in on its own.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Mapping
from typing import Any

from kafka_mirror.kafka.private_dirs import private_dir

__all__ = ["KerberosLoginError", "keytab_login", "private_ccache"]

_lock = threading.Lock()
_private_dir: str | None = None
_principals: dict[str, str] = {}  # principal -> who logged in as it first
# cache types that hold one cache per principal (MIT Kerberos collections)
_COLLECTIONS = ("DIR:", "KEYRING:", "KCM:", "API:")


class KerberosLoginError(RuntimeError):
    """``kinit`` with a keytab failed; the message is kinit's own."""


def private_ccache() -> str:
    """The process's credential cache: ``KRB5CCNAME`` if set, else a private one (set here)."""
    global _private_dir
    with _lock:
        current = os.environ.get("KRB5CCNAME")
        if current:
            return current
        _private_dir = str(private_dir("krb5"))
        collection = os.path.join(_private_dir, "ccache")
        os.mkdir(collection, 0o700)
        ccache = f"DIR:{collection}"
        os.environ["KRB5CCNAME"] = ccache
        return ccache


def keytab_login(conf: Mapping[str, Any], who: str, timeout: float = 30.0) -> str | None:
    """``kinit -k -t <keytab> <principal>`` for a librdkafka config that logs in with a keytab.

    Does nothing (returns None) for other configs. Raises :class:`KerberosLoginError` with
    kinit's message when the login fails. Returns a warning when this process already logged in
    as another principal (see the module's docstring), else None.
    """
    keytab = conf.get("sasl.kerberos.keytab")
    if not keytab or str(conf.get("sasl.mechanisms", "GSSAPI")).upper() != "GSSAPI":
        return None
    principal = str(conf.get("sasl.kerberos.principal") or "kafkaclient")
    ccache = private_ccache()
    # no -c: in a collection kinit then uses (or adds) the cache of this principal
    argv = ["kinit", "-k", "-t", str(keytab), principal]
    try:
        result = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
            check=False, env={**os.environ, "KRB5CCNAME": ccache},
        )
    except FileNotFoundError as err:
        raise KerberosLoginError(
            "kinit not found: keytab logins need the MIT Kerberos client tools (Debian: "
            "krb5-user, RHEL: krb5-workstation)"
        ) from err
    except subprocess.TimeoutExpired as err:
        raise KerberosLoginError(
            f"Kerberos login as {principal} (keytab {keytab}) got no answer from the KDC "
            f"within {timeout:.0f}s"
        ) from err
    if result.returncode != 0:
        message = (result.stderr or result.stdout).strip() or f"exit {result.returncode}"
        raise KerberosLoginError(
            f"Kerberos login as {principal} with keytab {keytab} failed: {message}"
        )
    with _lock:
        new = principal not in _principals
        _principals.setdefault(principal, who)
        if ccache.upper().startswith(_COLLECTIONS):
            realm = _realm(principal)
            others = sorted(p for p in _principals if p != principal and _realm(p) == realm)
            why = "of the same realm"
        else:
            others = sorted(p for p in _principals if p != principal)
            why = f"with the single credential cache {ccache} (KRB5CCNAME)"
    if new and others:
        return (
            f"{who} logs in to Kerberos as {principal}, another principal than "
            f"{', '.join(others)} {why}: the control plane (librdkafka) picks a principal "
            "per connection by the broker's realm only, so new connections may present the "
            "other one, which then needs the rights of both (the Spark side is not affected)"
        )
    return None


def _realm(principal: str) -> str:
    return principal.rpartition("@")[2] if "@" in principal else ""
