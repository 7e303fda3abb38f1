"""A SASL password rotated with kafka.mirror.site under continuous produce (issue 29, "Day-2
operations"): km-supervisord writes into the destination with SCRAM-SHA-512 (its host_vars). The
cluster gets the new password first (SCRAM keeps one per user: the old one stops working for new
logins; the mirror's open connections stay logged in). The change (the new password, and a new topic
list in the same run) is planned with `--check --diff`: the mm2.properties diff shows the
topics.exclude line, neither password shows anywhere, nothing changes. Then it is applied in the
default mode (rolling): the instance restarts on the new password and is waited for. Then the same
back to the first password and the old topic list. No record produced meanwhile is lost or written
twice. Run in the supervisord scenario."""

import json
import os
import secrets
import subprocess
import uuid

import pytest
from releases import main_pid

TOPIC = "molecule.orders"
EXCLUDED = "molecule\\.rotation-excluded"
SCRAM_LISTENER = f"{os.environ.get('MOL_BRIDGE_IP', '10.77.0.1')}:19194"
SECRETS_FILE = "/etc/kafka-mirror/mm2-secrets.properties"


def _set_password(user, password):
    """The destination cluster's SCRAM-SHA-512 password of ``user`` (kafka-test-cluster.sh)."""
    script = os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "_shared", "kafka-test-cluster.sh")
    done = subprocess.run([script, "scram-user", "destination", user, password], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def _logs_in(user, password):
    from confluent_kafka.admin import AdminClient
    try:
        AdminClient({"bootstrap.servers": SCRAM_LISTENER, "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password,
                     "log_level": 0}).list_topics(timeout=10)
        return True
    except Exception:   # an authentication failure shows as a transport error: no metadata
        return False


def test_a_scram_password_rotated_under_produce_loses_nothing(host, producing, read_mirrored, site):
    if os.environ.get("MOLECULE_SCENARIO_NAME") != "supervisord":
        pytest.skip("the SASL password rotation is exercised in the supervisord scenario")
    hv = host.ansible.get_variables()
    name, alias = hv["inventory_hostname"], hv.get("mirror_source_alias", "source")
    user, first = hv["mirror_destination_sasl_username"], hv["mirror_destination_sasl_password"]
    assert hv["mirror_destination_sasl_mechanism"] == "SCRAM-SHA-512"
    rotated = "rotated" + secrets.token_hex(8)
    excludes = hv.get("mirror_topics_exclude", [".*[\\-\\.]internal", ".*\\.replica", "__.*"])
    change = json.dumps({"mirror_destination_sasl_password": rotated, "mirror_topics_exclude": excludes + [EXCLUDED]})

    # the rotation and back, each: the cluster first (SCRAM keeps one password per user: new logins
    # need the new one at once), then the plan (the first time), then the rolling apply
    with producing(TOPIC) as sent:
        for password, was, extra in ((rotated, first, change), (first, rotated, "{}")):
            _set_password(user, password)
            assert _logs_in(user, password) and not _logs_in(user, was), "the cluster did not take the new password"
            if password == rotated:
                # the plan: the topic line shows, no password does, nothing changes
                plan = site("--check", "--diff", "-e", change)
                assert plan.returncode == 0, plan.stdout[-4000:] + plan.stderr[-2000:]
                assert [line for line in plan.stdout.splitlines()
                        if line.startswith("+topics.exclude=") and "rotation-excluded" in line], plan.stdout[-4000:]
                for secret in (first, rotated):
                    assert secret not in plan.stdout + plan.stderr, "a password in the plan's output"
                assert f'password="{first}"' in host.file(SECRETS_FILE).content_string
            pid = main_pid(host)
            run = site("-e", extra)
            assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
            assert f'"msg": "{name}: kafka-mirror restarted; ' in run.stdout, run.stdout[-4000:]
            assert main_pid(host) != pid
            assert password not in run.stdout + run.stderr and was not in run.stdout + run.stderr
            assert f'password="{password}"' in host.file(SECRETS_FILE).content_string
    copies = {}
    got = read_mirrored(f"{alias}.{TOPIC}", sent, f"molecule-rotation-{uuid.uuid4().hex}", 300, copies=copies,
                        **{"topic.metadata.refresh.interval.ms": 2000})
    assert len(got) == len(sent), f"{len(sent) - len(got)}/{len(sent)} records mirrored across the rotation"
    assert got == sent
    assert not {key for key, n in copies.items() if n > 1}, "records on the target more than once"
    assert len(sent) > 300
