"""kafka.mirror.rolling_restart under continuous produce: every host restarts, the playbook waits for
the mirror's own readiness (its /health/ready endpoint; new positions in its lag group when the
endpoint is off: the supervisord scenario), and no record is lost. Run for the kafka_mirror engine's
hosts of the default and supervisord scenarios, each with --limit to the host under test (stock
MirrorMaker 2 hosts in the same inventory are left running). In the CI form the default scenario
leaves it to the rolling apply (test_rolling_apply.py), which restarts km-default under produce
through the same restart tasks (roles/mirror/tasks/restart.yml) and readiness wait, and to the
modules step's JMX exporter check, which runs kafka.mirror.rolling_restart itself; the full form
(KAFKA_MIRROR_FULL=1) runs it here and in the supervisord scenario, and the fleet scenario's rolling
restart test runs the playbook over several instances per host."""

import os
import subprocess
import uuid

import pytest

SCENARIOS = ("default", "supervisord")   # the kafka_mirror engine under systemd and supervisord
FULL = os.environ.get("KAFKA_MIRROR_FULL", "0") not in ("", "0")


def _main_pid(host):
    hv = host.ansible.get_variables()
    if hv.get("mirror_service_manager", "systemd") == "systemd":
        return int(host.check_output("systemctl show -p MainPID --value kafka-mirror"))
    return int(host.check_output("supervisorctl pid kafka-mirror").strip())


def test_rolling_restart_waits_for_the_mirror_and_loses_nothing(host, read_mirrored, producing):
    if os.environ.get("MOLECULE_SCENARIO_NAME") not in SCENARIOS:
        pytest.skip("rolling restart is exercised in the default and supervisord scenarios")
    if not FULL:
        pytest.skip("the full form's (KAFKA_MIRROR_FULL=1): the CI form restarts km-default in the rolling apply")
    hv = host.ansible.get_variables()
    if "mirror" not in hv.get("group_names", []):
        pytest.skip("not a mirror host")
    if hv.get("mirror_engine", "kafka_mirror") != "kafka_mirror":
        pytest.skip("rolling restart is exercised on the kafka_mirror engine's hosts")
    topic = "molecule.orders"
    pid_before = _main_pid(host)
    with producing(topic, pause=0.005) as sent:
        inventory = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
        run = subprocess.run(["ansible-playbook", "-i", inventory, "kafka.mirror.rolling_restart",
                              "--limit", hv["inventory_hostname"], "-e", "kafka_mirror_restart_pause=3"],
                             capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    if hv.get("mirror_metrics_enabled", True):
        port = hv.get("mirror_metrics_port", 9405)
        scheme = "https" if hv.get("mirror_metrics_tls_keystore_src") else "http"
        assert f"ready: {scheme}://127.0.0.1:{port}/health/ready answered 200" in run.stdout, run.stdout[-3000:]
    else:
        assert "new positions committed" in run.stdout, run.stdout[-3000:]
    assert _main_pid(host) != pid_before
    got = read_mirrored(f"{hv['mirror_source_alias']}.{topic}", sent, f"molecule-restart-{uuid.uuid4().hex}", 300,
                        **{"topic.metadata.refresh.interval.ms": 2000})
    assert len(sent) > 500
    assert len(got) == len(sent), f"{len(got)}/{len(sent)} records mirrored across the restart"
    assert got == sent
