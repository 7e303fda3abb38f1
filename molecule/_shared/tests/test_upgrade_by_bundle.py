"""Rollback to the previous release and upgrade back by release bundle, under supervisord (issue 29,
"Day-2 operations"): the supervisord scenario's kafka_mirror engine goes from the scenario's bundle
(N) to the previous release's (N-1, built from its own commit's tree) and back, under continuous produce;
each run stops the program (supervisorctl), archives its state, starts it on the other installation
and waits for it; every record produced meanwhile is on the target exactly once
(molecule/_shared/releases.py; the same path under systemd and over GSSAPI: the kerberos scenario's
test_upgrade.py)."""

import os
import uuid

import pytest
from releases import rollback_then_upgrade

TOPIC = "molecule.orders"


def test_rollback_to_the_previous_release_then_upgrade_under_supervisord(host, producing, read_mirrored, site):
    if os.environ.get("MOLECULE_SCENARIO_NAME") != "supervisord":
        pytest.skip("the supervisord scenario's upgrade (the kerberos scenario's is under systemd)")
    hv = host.ansible.get_variables()
    assert hv["mirror_service_manager"] == "supervisord"
    alias = hv.get("mirror_source_alias", "source")

    def site_under_produce(*args):
        with producing(TOPIC) as sent:
            run = site(*args)
        return run, sent

    def assert_each_once(sent):
        copies = {}
        got = read_mirrored(f"{alias}.{TOPIC}", sent, f"molecule-upgrade-{uuid.uuid4().hex}", 300, copies=copies,
                            **{"topic.metadata.refresh.interval.ms": 2000})
        assert len(got) == len(sent), f"{len(sent) - len(got)}/{len(sent)} records not mirrored"
        assert got == sent, "records in other partitions"
        twice = {key: n for key, n in copies.items() if n > 1}
        assert not twice, f"{len(twice)} records on the target more than once"

    rollback_then_upgrade(host, site, site_under_produce, assert_each_once)
