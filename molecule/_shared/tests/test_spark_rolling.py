"""kafka.mirror.site rolls a change of the Spark workers (spark_cluster scenario, issue 29): with a new
spark_worker_memory, under continuous produce, the workers restart one at a time, each registered
with the master again before the next worker's play runs; the master is not restarted, and the
mirror, whose executors ran on the restarted workers, loses no record. Runs last in the scenario
(the workers keep the new memory until the cleanup)."""

import json
import os
import re
import subprocess
import uuid

import pytest

WORKERS = ("km-worker1", "km-worker2")   # inventory order: the order of the rolling apply
NEW_MEMORY = "1100m"


def _pid(host, unit):
    return int(host.check_output(f"systemctl show -p MainPID --value {unit}"))


def test_a_worker_change_rolls_one_worker_at_a_time(host, read_mirrored, producing, inventory_host):
    if os.environ.get("MOLECULE_SCENARIO_NAME") != "spark_cluster":
        pytest.skip("the Spark workers' rolling apply is exercised in the spark_cluster scenario")
    hv = host.ansible.get_variables()
    if hv["inventory_hostname"] != "km-master":
        pytest.skip("cluster-wide, checked once")
    workers = {name: inventory_host(name) for name in WORKERS}
    before = {name: _pid(h, "spark-worker") for name, h in workers.items()}
    master_pid = _pid(host, "spark-master")

    topic = "molecule.orders"
    inventory = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
    playbook = os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "_shared", "converge.yml")
    with producing(topic) as sent:
        run = subprocess.run(["ansible-playbook", "-i", inventory, playbook, "-e", f"spark_worker_memory={NEW_MEMORY}"],
                             capture_output=True, text=True, timeout=1200, check=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    master_url = f"spark://{hv['spark_bind_address']}:7077"
    came_back = []
    for name in WORKERS:
        match = re.search(rf'"msg": "{name}: Spark spark-worker restarted; ready: registered with ([^"]*)"', run.stdout)
        assert match, (name, run.stdout[-4000:])
        assert match.group(1) == master_url, match.group(1)
        came_back.append(match.start())
    assert came_back == sorted(came_back), "workers restarted out of inventory order"
    # serial: the second worker's play (its tasks of the spark role) ran after the first came back
    assert re.search(r"^TASK \[kafka\.mirror\.spark : ", run.stdout[came_back[0]:came_back[1]], re.M), \
        "the workers were not rolled one at a time"
    after = {name: _pid(h, "spark-worker") for name, h in workers.items()}
    assert all(after[name] != before[name] for name in WORKERS), (before, after)
    assert _pid(host, "spark-master") == master_pid, "the master was restarted"
    for name, h in workers.items():
        state = json.loads(h.check_output(f"curl -sf http://{h.ansible.get_variables()['spark_bind_address']}:8081/json/"))
        assert state["memory"] == 1100, (name, state["memory"])
    assert len(sent) > 300
    got = read_mirrored(f"{hv['mirror_source_alias']}.{topic}", sent, f"molecule-spark-rolling-{uuid.uuid4().hex}", 300,
                        **{"topic.metadata.refresh.interval.ms": 2000})
    assert len(got) == len(sent), f"{len(got)}/{len(sent)} records mirrored across the workers' restarts"
    assert got == sent
