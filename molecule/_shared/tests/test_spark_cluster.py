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


def _spark_distribution(host):
    hv = host.ansible.get_variables()
    if hv.get("spark_install_method") != "distribution" or not set(_groups(host)) & {"spark_master", "spark_workers"}:
        pytest.skip("no Spark daemon from a distribution here")
    return hv


def test_daemons_run_from_the_distribution(host):
    """spark_install_method=distribution: the tarball downloaded from the artifact server (same bytes
    as on the controller, verified with the release-style .sha512 URL) is unpacked, owned by root, and
    the master/worker JVMs run from the current link, as the spark user."""
    import hashlib
    import os
    import pathlib

    _spark_distribution(host)
    name = "spark-4.2.0-bin-hadoop3"
    current = host.file("/opt/spark/current")
    assert current.is_symlink and current.linked_to == f"/opt/spark/{name}"
    for f in ("bin/spark-submit", "bin/spark-class", "sbin/spark-daemon.sh"):
        x = host.file(f"/opt/spark/{name}/{f}")
        assert x.is_file and x.user == "root" and x.mode & 0o755 == 0o755, f
    jars = host.file(f"/opt/spark/{name}/jars")
    assert jars.is_directory and jars.user == "root"
    local = pathlib.Path(os.environ.get("MOL_HOME", "/tmp/kafka-mirror-molecule"),
                         "artifacts/http/spark/spark-4.2.0", f"{name}.tgz")
    tgz = host.file(f"/opt/spark/{name}.tgz")
    assert tgz.exists and tgz.user == "root"
    assert tgz.md5sum == hashlib.md5(local.read_bytes()).hexdigest()
    daemon = "spark-master" if "spark_master" in _groups(host) else "spark-worker"
    pid = host.check_output(f"systemctl show -p MainPID --value {daemon}")
    assert int(pid) > 0
    assert host.check_output(f"ps -o user= -p {pid}") == "spark"
    argv = host.check_output(f"tr '\\0' '\\n' < /proc/{pid}/cmdline").splitlines()
    assert "/opt/spark/current/jars/*" in argv[argv.index("-cp") + 1]


def test_executors_run_from_the_distribution(host):
    """The mirror's executors on a worker are launched from the worker's distribution (no pyspark
    virtualenv on the workers)."""
    _spark_distribution(host)
    if "spark_workers" not in _groups(host):
        pytest.skip("not a Spark worker")
    assert not host.file("/opt/kafka-mirror/venv").exists
    out = ""
    for _ in range(60):
        out = host.run("pgrep -u spark -f CoarseGrainedExecutorBackend").stdout.split()
        if out:
            break
        time.sleep(2)
    assert out, "no executor on this worker"
    argv = host.check_output(f"tr '\\0' '\\n' < /proc/{out[0]}/cmdline").splitlines()
    assert "/opt/spark/current/jars/*" in argv[argv.index("-cp") + 1]
