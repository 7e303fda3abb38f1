"""Behaviour of a host converged with ``mirror_engine: mirrormaker2`` (default scenario: km-mm2 and
km-mm2-sv): stock MirrorMaker 2 from the kafka_tools role's Kafka install runs as the non-root
service user (a systemd unit or a supervisord program) with an explicit heap and the role's log4j2
configuration, and mirrors records partition for partition. The engine-independent checks (hardening, JMX exporter, extra
files, ...) are in test_mirror.py."""

import os
import re
import time
import uuid

import pytest

BRIDGE_IP = os.environ.get("MOL_BRIDGE_IP", "10.77.0.1")
SOURCE = f"{BRIDGE_IP}:19092"
DESTINATION = f"{BRIDGE_IP}:19192"
SERVICE = "kafka-mirror"
USER = "kafka-mirror"
CONF = "/etc/kafka-mirror"
MM2_MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"


@pytest.fixture()
def mm2_host(host):
    hv = host.ansible.get_variables()
    if "mirror" not in hv.get("group_names", []) or hv.get("mirror_engine") != "mirrormaker2":
        pytest.skip("not a stock MirrorMaker 2 host")
    return host


def _vars(host):
    return host.ansible.get_variables()


def _systemd(host):
    return _vars(host).get("mirror_service_manager", "systemd") == "systemd"


def _main_pid(host):
    if _systemd(host):
        pid = int(host.check_output(f"systemctl show -p MainPID --value {SERVICE}"))
    else:
        pid = int(host.check_output(f"supervisorctl pid {SERVICE}"))
    assert pid > 0, f"{SERVICE} has no main process"
    return pid


def _cmdline(host, pid):
    return host.check_output(f"tr '\\0' '\\n' < /proc/{pid}/cmdline").splitlines()


def _heap_flags(opts):
    return [f for f in opts.split() if f.startswith(("-Xmx", "-Xms"))]


def _size_bytes(flag):
    m = re.fullmatch(r"-Xm[xs](\d+)([kKmMgG]?)", flag)
    assert m, flag
    return int(m.group(1)) * {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}[m.group(2).lower()]


def test_stock_mm2_runs_as_service_user(mm2_host):
    host = mm2_host
    if _systemd(host):
        svc = host.service(SERVICE)
        assert svc.is_running and svc.is_enabled
        assert host.check_output(f"systemctl show -p User --value {SERVICE}") == USER
    else:
        assert "RUNNING" in host.check_output(f"supervisorctl status {SERVICE}")
        program = host.file(f"/etc/supervisor/conf.d/{SERVICE}.conf").content_string.splitlines()
        assert f"user={USER}" in program
        assert not host.file(f"/etc/systemd/system/{SERVICE}.service").exists
    pid = _main_pid(host)
    if not _systemd(host):
        # a child of supervisord, which runs as root and starts the program as the service user
        ppid = host.check_output(f"ps -o ppid= -p {pid}").strip()
        assert "supervisord" in host.check_output(f"ps -o args= -p {ppid}")
    # connect-mirror-maker.sh and kafka-run-class.sh exec: the main process is the MM2 JVM itself
    assert host.check_output(f"ps -o user= -p {pid}") == USER
    assert host.check_output(f"ps -o comm= -p {pid}") == "java"
    uid = host.check_output(f"awk '/^Uid:/ {{print $2}}' /proc/{pid}/status")
    assert uid != "0"
    argv = _cmdline(host, pid)
    assert MM2_MAIN in argv
    assert argv[-1] == f"{CONF}/mm2.properties"
    cp = argv[argv.index("-cp") + 1]
    assert cp.startswith("/opt/kafka/current/libs") or "/opt/kafka/current/" in cp
    # no Spark / kafka-mirror virtualenv for the stock engine
    assert not host.file("/opt/kafka-mirror/venv").exists


def test_jvm_heap_is_the_configured_one(mm2_host):
    host = mm2_host
    want = _heap_flags(_vars(host)["mirror_heap_opts"])
    assert any(f.startswith("-Xmx") for f in want)
    argv = _cmdline(host, _main_pid(host))
    # exactly the configured heap flags: neither the launcher's default (-Xmx2G) nor a second -Xmx
    assert _heap_flags(" ".join(argv)) == want
    # and the running JVM really has that heap: max heap as reported by the JMX exporter
    xmx = _size_bytes(next(f for f in want if f.startswith("-Xmx")))
    metrics = ""
    for _ in range(30):
        metrics = host.run("curl -sf http://127.0.0.1:9404/metrics").stdout
        if "jvm_memory_max_bytes" in metrics:
            break
        time.sleep(2)
    m = re.search(r'^jvm_memory_max_bytes\{area="heap",?\}\s+(\S+)$', metrics, re.M)
    assert m, "no jvm_memory_max_bytes{area=heap} from the JMX exporter"
    assert 0.85 * xmx <= float(m.group(1)) <= xmx


def test_config_files_owner_and_mode(mm2_host):
    host = mm2_host
    hv = _vars(host)
    src, dst = hv["mirror_source_alias"], hv["mirror_destination_alias"]
    conf = host.file(f"{CONF}/mm2.properties")
    assert (conf.user, conf.group, conf.mode) == (USER, USER, 0o600)
    text = conf.content_string
    for line in (f"clusters={src},{dst}", f"{src}->{dst}.enabled=true", f"{dst}->{src}.enabled=false",
                 f"{src}.bootstrap.servers={SOURCE}", f"{dst}.bootstrap.servers={DESTINATION}",
                 "replication.policy.class=org.apache.kafka.connect.mirror.DefaultReplicationPolicy"):
        assert line in text.splitlines(), line
    assert "connect-mirror-maker.sh" in text  # rendered for the stock engine
    log4j = host.file(f"{CONF}/mm2-log4j2.properties")
    assert (log4j.user, log4j.group, log4j.mode) == ("root", USER, 0o640)
    env = host.file(f"{CONF}/{SERVICE}.env")
    assert (env.user, env.group, env.mode) == ("root", USER, 0o640)
    assert f'KAFKA_HEAP_OPTS="{hv["mirror_heap_opts"]}"' in env.content_string
    assert "PYSPARK_PYTHON" not in env.content_string
    # the stock MM2 process can read its config; the config is not world-readable
    assert host.run(f"runuser -u {USER} -- test -r {CONF}/mm2.properties").rc == 0
    assert host.run(f"runuser -u nobody -- cat {CONF}/mm2.properties").rc != 0


def test_logs_through_the_role_log4j_config(mm2_host):
    """INFO lines of MirrorMaker in the journal (or supervisord's log file of the program): the role's
    log4j2 config is in use (the Kafka distribution's default config would not be found by the test
    distribution)."""
    host = mm2_host
    argv = _cmdline(host, _main_pid(host))
    assert f"-Dlog4j2.configurationFile={CONF}/mm2-log4j2.properties" in argv
    if _systemd(host):
        logs = f"journalctl -u {SERVICE} --no-pager -o cat"
    else:
        logs = f"cat {_vars(host).get('mirror_log_dir', '/var/log/kafka-mirror')}/{SERVICE}.log"
    out = ""
    for _ in range(60):
        out = host.run(logs).stdout
        if "Kafka MirrorMaker started" in out:
            break
        time.sleep(2)
    assert "Kafka MirrorMaker started" in out
    assert " INFO " in out


def test_logs_bounded(mm2_host):
    """A supervisord program's log file rotates at mirror_log_max_bytes with mirror_log_backups kept
    (km-mm2-sv sets both), and the program file, whose environment may carry secrets, is root's
    alone; a systemd host's journal is bounded by the drop-in of mirror_journald_max_use (km-mm2 sets
    it), which journald was restarted to read."""
    host = mm2_host
    hv = _vars(host)
    if not _systemd(host):
        program = host.file(f"/etc/supervisor/conf.d/{SERVICE}.conf")
        assert (program.user, program.group, program.mode) == ("root", "root", 0o640)
        lines = program.content_string.splitlines()
        assert f"stdout_logfile_maxbytes={hv['mirror_log_max_bytes']}" in lines
        assert f"stdout_logfile_backups={hv['mirror_log_backups']}" in lines
        return
    drop_in = host.file("/etc/systemd/journald.conf.d/60-kafka-mirror.conf")
    if not hv.get("mirror_journald_max_use"):
        assert not drop_in.exists
        return
    assert f"SystemMaxUse={hv['mirror_journald_max_use']}" in drop_in.content_string.splitlines()
    assert host.service("systemd-journald").is_running
    # journald (re)started after the drop-in was written (whole seconds, both the host's clock)
    started = host.check_output(
        "date -d \"$(systemctl show -p ActiveEnterTimestamp --value systemd-journald)\" +%s")
    written = host.check_output("stat -c %Y /etc/systemd/journald.conf.d/60-kafka-mirror.conf")
    assert int(started) >= int(written), (started, written)


def test_records_mirrored_with_partitions(mm2_host, read_mirrored):
    """Records produced to chosen partitions of a selected source topic appear on
    <source alias>.<topic> (DefaultReplicationPolicy) in the same partitions; a topic that is not
    selected is not mirrored; MirrorMaker 2's own heartbeats reach the destination."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    host = mm2_host
    src_alias = _vars(host)["mirror_source_alias"]
    topic = "molecule.events"  # 2 partitions, created by create.yml (seed-source.py)
    mirrored = f"{src_alias}.{topic}"
    marker = uuid.uuid4().hex
    p = Producer({"bootstrap.servers": SOURCE})
    sent = {}
    for i in range(40):
        key = f"{marker}-{i}".encode()
        p.produce(topic, key=key, value=b"mm2-%d" % i, partition=i % 2)
        sent[key] = i % 2
    p.produce("other.not-selected", key=marker.encode(), value=b"x")
    assert p.flush(30) == 0

    got = read_mirrored(mirrored, sent, f"molecule-mm2-{marker}", 180,
                        **{"topic.metadata.refresh.interval.ms": 2000})
    assert len(got) == len(sent), f"{len(got)}/{len(sent)} records mirrored to {mirrored}"
    assert got == sent

    admin_src = AdminClient({"bootstrap.servers": SOURCE})
    admin_dst = AdminClient({"bootstrap.servers": DESTINATION})
    dst_topics = admin_dst.list_topics(timeout=30).topics
    src_topics = admin_src.list_topics(timeout=30).topics
    assert len(dst_topics[mirrored].partitions) == len(src_topics[topic].partitions) == 2
    assert f"{src_alias}.other.not-selected" not in dst_topics
    assert "other.not-selected" not in dst_topics
    assert "heartbeats" in dst_topics  # MirrorHeartbeatConnector: stock MM2 is what runs


def test_kafka_distribution_source(mm2_host):
    """The Kafka distribution MM2 runs from: on hosts with kafka_tools_source=url, the tarball was
    downloaded from the artifact server (kept next to the install, checksum as on the controller);
    with controller_file, nothing is downloaded. Either way current -> the versioned directory."""
    import hashlib
    import pathlib

    host = mm2_host
    hv = _vars(host)
    name = "kafka_2.13-4.3.1"
    current = host.file("/opt/kafka/current")
    assert current.is_symlink and current.linked_to == f"/opt/kafka/{name}"
    libs = host.file(f"/opt/kafka/{name}/libs")
    assert libs.is_directory and (libs.user, libs.group) == ("root", "kafka")
    tgz = host.file(f"/opt/kafka/{name}.tgz")
    if hv.get("kafka_tools_source") == "url":
        mol_home = os.environ.get("MOL_HOME", "/tmp/kafka-mirror-molecule")
        local = pathlib.Path(mol_home, "artifacts", f"{name}.tgz")
        assert tgz.exists and (tgz.user, tgz.mode) == ("root", 0o644)
        assert tgz.sha256sum == hashlib.sha256(local.read_bytes()).hexdigest()
        ip = host.check_output("hostname -I").split()[0]
        access = pathlib.Path(mol_home, "http-server", "access.log").read_text()
        assert re.search(rf"^{re.escape(ip)} .*GET /kafka/4\.3\.1/{name}\.tgz HTTP/1\.1\" 200", access, re.M)
    else:
        assert not tgz.exists
