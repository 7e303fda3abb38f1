"""kafka.mirror.site applies a change rolling (issue 29): a topic-list change, planned with
`--check --diff -e mirror_restart_mode=deferred` (the mm2.properties line shows, no secret does),
then applied in the default mode (rolling) under continuous produce: the mirror hosts restart one
at a time, those that write no flow first (the stock MirrorMaker 2 hosts: no /status to say they
write), then km-default (its /status: it writes its flow), each waited for on its own readiness
before the next host's play runs, and no record is lost on any of the three mirrors. The plan named
exactly the tasks the apply changed, host by host, but the restart's own (roles/mirror/tasks/restart.yml)
and the deferred restart's notice, and those are only the change's template: check mode on the
converged hosts plans nothing else (test_check_mode's check in this scenario) and a second site run
on them changes nothing else (the idempotence check of the CI form: scripts/ansible-molecule.sh).
The full form (KAFKA_MIRROR_FULL=1) applies the change with `mirror_restart_mode=deferred` first
(files changed, no mirror restarted, each host reports the pending restart; the plan named exactly
the tasks it changed) and then reverts it rolling, as above. Run once, from km-default, in the default
scenario (its three mirror hosts: kafka-mirror under systemd, stock MirrorMaker 2 under systemd and
under supervisord)."""

import json
import os
import re
import uuid

import pytest
import yaml

HOSTS = ("km-default", "km-mm2", "km-mm2-sv")   # inventory order
# the order of the rolling apply: the hosts that write no flow first (in inventory order), then the writers
ROLLING_ORDER = ("km-mm2", "km-mm2-sv", "km-default")
EXCLUDED = "molecule\\.rolling-excluded"
# secrets of the default scenario's hosts (host_vars): never in a plan's output
SECRETS = ("s3cr", "scr:ape", "molecule-store")
FULL = os.environ.get("KAFKA_MIRROR_FULL", "0") not in ("", "0")
TEMPLATE = "kafka.mirror.mirror : MirrorMaker 2 style configuration (mm2.properties)"
DEFERRED_NOTICE = "kafka.mirror.mirror : Restart of kafka-mirror deferred"


def _changed_tasks(stdout):
    """The (host, task) pairs a playbook run reports changed (handlers included)."""
    changed, task = set(), None
    for line in stdout.splitlines():
        if line.startswith(("TASK [", "RUNNING HANDLER [")):
            task = line.split("[", 1)[1].rsplit("]", 1)[0]
        elif line.startswith("changed: ["):
            changed.add((line.split("[", 1)[1].split("]", 1)[0].split(" -> ", 1)[0], task))
    return changed


def _restart_tasks():
    """The names of the restart's own tasks (the role's one restart path, restart.yml), as a run prints them."""
    path = os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "roles", "mirror", "tasks", "restart.yml")
    with open(path, encoding="utf-8") as fh:
        return {f"kafka.mirror.mirror : {task['name']}" for task in yaml.safe_load(fh)}


def _pids(inventory_host):
    """The main PID of every mirror host's service."""
    pids = {}
    for name in HOSTS:
        other = inventory_host(name)
        manager = other.ansible.get_variables().get("mirror_service_manager", "systemd")
        if manager == "systemd":
            pids[name] = int(other.check_output("systemctl show -p MainPID --value kafka-mirror"))
        else:
            pids[name] = int(other.check_output("supervisorctl pid kafka-mirror").strip())
    return pids


def test_a_change_is_planned_deferred_then_applied_one_host_at_a_time(host, read_mirrored, producing, inventory_host,
                                                                        site):
    if os.environ.get("MOLECULE_SCENARIO_NAME") != "default":
        pytest.skip("the rolling apply is exercised in the default scenario")
    hv = host.ansible.get_variables()
    if hv["inventory_hostname"] != "km-default":
        pytest.skip("fleet-wide, checked once")
    excludes = hv.get("mirror_topics_exclude", [".*[\\-\\.]internal", ".*\\.replica", "__.*"])
    change = json.dumps({"mirror_topics_exclude": excludes + [EXCLUDED]})

    # the plan: every mirror host's mm2.properties diff shows the new topics.exclude, no secret shows
    # the plan and the deferred apply restart nothing: every host at once (kafka_mirror_serial)
    plan = site("--check", "--diff", "-e", change, "-e", "mirror_restart_mode=deferred",
                 "-e", "kafka_mirror_serial=100%")
    assert plan.returncode == 0, plan.stdout[-4000:] + plan.stderr[-2000:]
    added = [line for line in plan.stdout.splitlines()
             if line.startswith("+topics.exclude=") and "rolling-excluded" in line]
    assert len(added) >= len(HOSTS), plan.stdout[-4000:]
    for secret in SECRETS:
        assert secret not in plan.stdout, f"a secret ({secret[:3]}...) in the plan's output"

    pids = _pids(inventory_host)
    planned = _changed_tasks(plan.stdout)
    assert {task for _, task in planned} <= {TEMPLATE, DEFERRED_NOTICE}, sorted(planned)
    rolling_args = ("-e", change)   # the CI form: the change applied rolling
    if FULL:
        # deferred: the change is applied, no mirror restarts, each host says it waits for a restart
        deferred = site("-e", change, "-e", "mirror_restart_mode=deferred", "-e", "kafka_mirror_serial=100%")
        assert deferred.returncode == 0, deferred.stdout[-4000:] + deferred.stderr[-2000:]
        for name in HOSTS:
            assert f"{name}: kafka-mirror runs its previous configuration until it is restarted" in deferred.stdout, \
                deferred.stdout[-3000:]
        assert "restarted; " not in deferred.stdout
        # check mode predicted the apply: the same tasks changed on the same hosts, and only the change's
        applied = _changed_tasks(deferred.stdout)
        assert planned == applied, (sorted(planned - applied), sorted(applied - planned))
        assert {task for _, task in applied} <= {TEMPLATE, DEFERRED_NOTICE}, sorted(applied)
        assert _pids(inventory_host) == pids
        assert EXCLUDED in host.file("/etc/kafka-mirror/mm2.properties").content_string.replace("\\\\", "\\")
        rolling_args = ()   # the revert

    # the change (the CI form) or its revert (the full form) in the default mode (rolling), under continuous produce
    topic = "molecule.orders"
    with producing(topic) as sent:
        rolling = site(*rolling_args)
    assert rolling.returncode == 0, rolling.stdout[-4000:] + rolling.stderr[-2000:]
    if not FULL:
        # check mode predicted the apply: the same tasks changed on the same hosts but the restart's
        # own (the plan's mode was deferred: its notice instead), and those are only the change's
        # template: a second site run on the converged hosts changes nothing else
        applied = _changed_tasks(rolling.stdout)
        restart = _restart_tasks()
        kept = {(name, task) for name, task in applied if task not in restart}
        assert kept == {(name, task) for name, task in planned if task != DEFERRED_NOTICE}, \
            (sorted(planned), sorted(applied))
        assert {task for _, task in kept} <= {TEMPLATE}, sorted(kept)
        assert {name for name, task in applied if task in restart} == set(HOSTS), sorted(applied)
    # each host restarted, waited for (its own readiness), before the next host's play ran: the
    # rolling play's tasks of a host come after the previous host's readiness report
    came_back = []
    for name in ROLLING_ORDER:
        match = re.search(rf'"msg": "{name}: kafka-mirror restarted; ([^"]*)"', rolling.stdout)
        assert match, (name, rolling.stdout[-4000:])
        assert match.group(1).startswith("ready"), match.group(1)
        came_back.append(match.start())
    assert came_back == sorted(came_back), f"hosts restarted out of the order {ROLLING_ORDER}"
    assert "km-default: writers, restarted last: kafka-mirror;" in rolling.stdout, rolling.stdout[-4000:]
    for before, after in zip(came_back, came_back[1:]):
        between = rolling.stdout[before:after]
        assert re.search(r"^TASK \[kafka\.mirror\.mirror : ", between, re.M), \
            "the next host's mirror play did not run after the previous host came back"
    scheme = "https" if hv.get("mirror_metrics_tls_keystore_src") else "http"
    assert f"km-default: kafka-mirror restarted; ready: {scheme}://127.0.0.1:{hv.get('mirror_metrics_port', 9405)}" \
           "/health/ready answered 200" in rolling.stdout
    after = _pids(inventory_host)
    assert all(after[name] != pids[name] for name in HOSTS), (pids, after)
    # the change is in place after the CI form's apply, gone after the full form's revert
    assert (EXCLUDED in host.file("/etc/kafka-mirror/mm2.properties").content_string.replace("\\\\", "\\")) is not FULL
    assert len(sent) > 300
    for name in HOSTS:
        alias = inventory_host(name).ansible.get_variables().get("mirror_source_alias", "source")
        got = read_mirrored(f"{alias}.{topic}", sent, f"molecule-rolling-{name}-{uuid.uuid4().hex}", 300,
                            **{"topic.metadata.refresh.interval.ms": 2000})
        assert len(got) == len(sent), f"{name}: {len(got)}/{len(sent)} records mirrored across the rolling apply"
        assert got == sent, name
