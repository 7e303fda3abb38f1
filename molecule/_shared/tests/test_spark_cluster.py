"""Spark standalone cluster (spark_cluster scenario): master + workers as non-root services, the
mirror submitted to the cluster."""

import json
import time

import pytest


def _groups(host):
    return host.ansible.get_variables().get("group_names", [])


def test_worker_service(host):
    if "spark_workers" not in _groups(host):
        pytest.skip("not a Spark worker")
    svc = host.service("spark-worker")
    assert svc.is_running and svc.is_enabled
    assert host.check_output("systemctl show -p User --value spark-worker") == "spark"
    ip = host.check_output("hostname -I").split()[0]
    # the JVM listens on the bind address, shown by ss as an IPv4-mapped IPv6 address
    assert ip in host.check_output("ss -Htln sport = :8081")


def test_master_sees_workers_and_mirror_app(host):
    if "spark_master" not in _groups(host):
        pytest.skip("not the Spark master")
    svc = host.service("spark-master")
    assert svc.is_running and svc.is_enabled
    assert host.check_output("systemctl show -p User --value spark-master") == "spark"
    ip = host.check_output("hostname -I").split()[0]
    assert ip in host.check_output("ss -Htln sport = :7077")
    state = {}
    for _ in range(60):
        out = host.run(f"curl -sf http://{ip}:8080/json/")
        if out.rc == 0:
            state = json.loads(out.stdout)
            if state.get("aliveworkers") == 2 and state.get("activeapps"):
                break
        time.sleep(2)
    assert state.get("aliveworkers") == 2, state
    apps = [a.get("name") for a in state.get("activeapps", [])]
    assert any("kafka-mirror" in (n or "") for n in apps), apps
    # executors of the mirror run on the workers (not only the driver on this host)
    app = state["activeapps"][0]
    assert app.get("cores", 0) > 0
