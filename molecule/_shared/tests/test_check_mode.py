"""`ansible-playbook --check` of the converge playbook on the converged hosts plans no change."""

import os
import re
import subprocess

import pytest


def test_check_mode_of_converged_hosts_reports_no_change():
    if os.environ.get("MOLECULE_SCENARIO_NAME") == "default":
        # the rolling apply's plan there is a check-mode run of the converged hosts whose changed
        # tasks must be exactly those its apply changed (test_rolling_apply): one run less
        pytest.skip("checked by the rolling apply's plan in the default scenario")
    inventory = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
    playbook = os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "_shared", "converge.yml")
    # every host at once (kafka_mirror_serial: nothing restarts in check mode, so nothing rolls)
    run = subprocess.run(["ansible-playbook", "-i", inventory, "--check", "-e", "kafka_mirror_serial=100%", playbook],
                         capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    recap = re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", run.stdout, re.M)
    assert recap, run.stdout[-2000:]
    changed_tasks, task = [], None   # the tasks that would change something, for the failure message
    for line in run.stdout.splitlines():
        if line.startswith(("TASK [", "RUNNING HANDLER [")):
            task = line.split("[", 1)[1].rsplit("]", 1)[0]
        elif line.startswith("changed: "):
            changed_tasks.append((task, line))
    assert all(changed == "0" for _, changed in recap), (recap, changed_tasks)
