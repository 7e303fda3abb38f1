"""kafka.mirror.site with mirror_restart_mode=immediate (issue 29): a topic-list change is applied and
the instance restarted without waiting for its readiness (the run reports it not waited for), then
reverted the same way; the program comes back on its own and no record produced meanwhile is lost
or written twice. Run in the supervisord scenario (its one kafka_mirror host; the default scenario
checks the rolling and deferred modes: test_rolling_apply.py)."""

import json
import os
import uuid

import pytest
from releases import main_pid

TOPIC = "molecule.orders"
EXCLUDED = "molecule\\.immediate-excluded"


def test_a_change_applied_immediately_restarts_without_waiting(host, producing, read_mirrored, site):
    if os.environ.get("MOLECULE_SCENARIO_NAME") != "supervisord":
        pytest.skip("the immediate restart mode is exercised in the supervisord scenario")
    hv = host.ansible.get_variables()
    name, alias = hv["inventory_hostname"], hv.get("mirror_source_alias", "source")
    excludes = hv.get("mirror_topics_exclude", [".*[\\-\\.]internal", ".*\\.replica", "__.*"])
    properties = "/etc/kafka-mirror/mm2.properties"
    with producing(TOPIC) as sent:
        for change, present in ((json.dumps({"mirror_topics_exclude": excludes + [EXCLUDED]}), True), ("{}", False)):
            pid = main_pid(host)
            run = site("-e", change, "-e", "mirror_restart_mode=immediate")
            assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
            assert f"{name}: kafka-mirror restarted; not waited for (mirror_restart_mode: immediate)" in run.stdout, \
                run.stdout[-4000:]
            assert main_pid(host) != pid
            assert (EXCLUDED in host.file(properties).content_string.replace("\\\\", "\\")) is present
    copies = {}
    got = read_mirrored(f"{alias}.{TOPIC}", sent, f"molecule-immediate-{uuid.uuid4().hex}", 300, copies=copies,
                        **{"topic.metadata.refresh.interval.ms": 2000})
    assert len(got) == len(sent), f"{len(sent) - len(got)}/{len(sent)} records mirrored across the immediate apply"
    assert got == sent
    assert not {key for key, n in copies.items() if n > 1}, "records on the target more than once"
