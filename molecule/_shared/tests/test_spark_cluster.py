"""Spark standalone cluster (spark_cluster scenario): master + workers as non-root services, the
mirror submitted to the cluster."""

import time

import pytest
from spark_ui import master_state  # molecule/_shared (conftest)


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
    state = master_state(host, ip, 2)
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


def _spark_auth(host):
    """The host's variables when Spark authentication applies to it: on by default (the spark
    role's spark_authenticate) wherever the inventory has a standalone master."""
    hv = host.ansible.get_variables()
    if not hv.get("spark_authenticate", True):
        pytest.skip("spark_authenticate is off")
    if not hv["groups"].get("spark_master"):
        pytest.skip("no Spark standalone cluster in the inventory")
    return hv


def _standalone_driver(hv):
    return str(hv.get("mirror_spark_master", "")).startswith("spark://")


def _properties(text):
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
    return out


def test_spark_authentication_secret(host):
    """spark_authenticate: the secret generated once on the master (root-only file) is in the
    daemons' spark-defaults.conf (root:spark 0640) and in the mirror driver's (kafka-mirror 0600),
    read through SPARK_CONF_DIR: never on a command line. That the workers and the driver hold the
    master's secret is shown by test_master_sees_workers_and_mirror_app (with authentication on,
    a worker or a driver with another secret cannot register)."""
    hv = _spark_auth(host)
    groups = set(_groups(host))
    secret = None
    if "spark_master" in groups:
        f = host.file("/etc/spark/authenticate.secret")
        assert f.user == "root" and f.group == "root" and f.mode == 0o600
        secret = f.content_string.strip()
        assert len(secret) >= 32
    files = []
    if groups & {"spark_master", "spark_workers"}:
        conf = host.file("/etc/spark/spark-defaults.conf")
        assert conf.user == "root" and conf.group == "spark" and conf.mode == 0o640
        assert "SPARK_CONF_DIR=/etc/spark" in host.file("/etc/default/spark").content_string
        files.append(conf)
        # the daemon read it: its SecurityManager says so at start
        daemon = "spark-master" if "spark_master" in groups else "spark-worker"
        log = host.check_output(f"journalctl -u {daemon} --no-pager -o cat")
        assert "SecurityManager: authentication enabled" in log
    if "mirror" in groups and _standalone_driver(hv):
        conf = host.file("/etc/kafka-mirror/spark/spark-defaults.conf")
        assert conf.user == "kafka-mirror" and conf.mode == 0o600
        assert 'SPARK_CONF_DIR="/etc/kafka-mirror/spark"' in host.file("/etc/kafka-mirror/kafka-mirror.env").content_string
        files.append(conf)
    values = [_properties(f.content_string) for f in files]
    for props in values:
        assert props["spark.authenticate"] == "true"
        assert props["spark.network.crypto.enabled"] == "true"
        assert len(props["spark.authenticate.secret"]) >= 32
    if secret:
        assert all(p["spark.authenticate.secret"] == secret for p in values)
    # the secret is on no command line of this host
    s = values[0]["spark.authenticate.secret"]
    assert s not in host.check_output("ps -e -ww -o args")


def test_no_spark_secret_in_local_mode(host):
    """Spark authentication is on by default, but a mirror in Spark's local mode has no daemon to
    authenticate to: no secret is generated or written for it, and its driver gets no
    spark.authenticate (nor RPC encryption, which needs it)."""
    hv = host.ansible.get_variables()
    engine = hv.get("mirror_engine", "kafka_mirror")
    if "mirror" not in hv["group_names"] or engine != "kafka_mirror":
        pytest.skip("not a kafka_mirror engine host")
    if hv["groups"].get("spark_master") or _standalone_driver(hv):
        pytest.skip("a Spark standalone cluster is in the inventory")
    assert not host.file("/etc/spark/authenticate.secret").exists
    conf = host.file("/etc/kafka-mirror/spark/spark-defaults.conf")
    if conf.exists:
        props = _properties(conf.content_string)
        assert "spark.authenticate" not in props and "spark.network.crypto.enabled" not in props
    env = host.file("/etc/kafka-mirror/kafka-mirror.env")
    assert not env.exists or "spark.authenticate" not in env.content_string


def test_client_files_on_workers(host):
    """The executors on the workers run the Kafka clients: mirror_extra_files (the binary keytab
    stand-in) are on every worker at the same path, byte for byte, same mode, owned by the user of
    the worker daemon (which runs the executors)."""
    import hashlib
    import os

    if "spark_workers" not in _groups(host) or "mirror" in _groups(host):
        pytest.skip("not a Spark worker")
    local = os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule/_shared/files/binary.keytab")
    with open(local, "rb") as fh:
        want = hashlib.md5(fh.read()).hexdigest()
    d = host.file("/etc/kafka-mirror")
    assert d.is_directory and d.user == "root" and d.group == "spark" and d.mode == 0o750
    f = host.file("/etc/kafka-mirror/test-binary.keytab")
    assert f.is_file and f.md5sum == want
    assert f.mode == 0o400 and f.user == "spark" and f.group == "spark"
    # readable by the executors' user
    assert host.run("runuser -u spark -- cat /etc/kafka-mirror/test-binary.keytab").rc == 0


def test_executor_logs_rolled_and_work_dirs_cleaned(host):
    """Bounded logs on a worker: its properties file rolls executor logs by size and keeps the
    clean-up of stopped applications' directories on; the worker says so when it starts the
    mirror's executor (Spark's FileAppender logs the rolling it set up for stdout and stderr)."""
    if "spark_workers" not in _groups(host):
        pytest.skip("not a Spark worker")
    hv = host.ansible.get_variables()
    size = int(hv.get("spark_executor_log_max_bytes", 134217728))
    props = _properties(host.file("/etc/spark/spark-defaults.conf").content_string)
    assert props["spark.executor.logs.rolling.strategy"] == "size"
    assert props["spark.executor.logs.rolling.maxSize"] == str(size)
    assert props["spark.executor.logs.rolling.maxRetainedFiles"] == str(hv.get("spark_executor_log_max_files", 5))
    assert props["spark.worker.cleanup.enabled"] == "true"
    assert int(props["spark.worker.cleanup.appDataTtl"]) > 0
    log = ""
    for _ in range(60):
        log = host.check_output("journalctl -u spark-worker --no-pager -o cat")
        if log.count(f"with rolling every {size} bytes") >= 2:
            break
        time.sleep(2)
    rolled = [line for line in log.splitlines() if f"with rolling every {size} bytes" in line]
    assert {line.rsplit("/", 1)[-1].split()[0] for line in rolled} >= {"stdout", "stderr"}, rolled
