"""Fixtures of the kerberos scenario's verifier (its Kerberos clients: molecule/_shared/krb_clients.py; releases:
molecule/_shared/releases.py)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "_shared"))

from krb_clients import krb5_env, realm_state  # noqa: E402


@pytest.fixture(scope="module")
def state():
    return realm_state()


@pytest.fixture(scope="module")
def krb_env(state):
    with krb5_env(state) as tmp:
        yield tmp


@pytest.fixture()
def krb_host(host):
    if "mol_kerberos" not in host.ansible.get_variables().get("group_names", []):
        pytest.skip("not a Kerberized mirror host")
    return host
