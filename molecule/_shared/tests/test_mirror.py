"""Behaviour of a converged kafka.mirror host: service, user, files, JMX exporter, data mirrored,
kafka-mirror's own metrics endpoint scraped from the controller."""

import os
import shlex
import time
import uuid

import pytest

BRIDGE_IP = os.environ.get("MOL_BRIDGE_IP", "10.77.0.1")
SOURCE = f"{BRIDGE_IP}:19092"
DESTINATION = f"{BRIDGE_IP}:19192"
SERVICE = "kafka-mirror"
USER = "kafka-mirror"


def _groups(host):
    return host.ansible.get_variables().get("group_names", [])


def _hostvars(host):
    return host.ansible.get_variables()


@pytest.fixture()
def mirror_host(host):
    if "mirror" not in _groups(host):
        pytest.skip("not a mirror host")
    return host


def _manager(host):
    return _hostvars(host).get("mirror_service_manager", "systemd")


def _main_pid(host):
    if _manager(host) == "systemd":
        return int(host.check_output(f"systemctl show -p MainPID --value {SERVICE}"))
    out = host.check_output(f"supervisorctl pid {SERVICE}")
    return int(out.strip())


def test_systemd_is_pid1(host):
    assert host.file("/proc/1/comm").content_string.strip() == "systemd"


def test_ssh_login_is_not_root_and_plays_escalate(host):
    """Ansible logs in as a non-root user (root accepts no SSH login) and the plays escalate with sudo."""
    login = _hostvars(host).get("ansible_user")
    assert login and login != "root"
    assert host.check_output("echo ${SUDO_USER:-none}") == login   # the verifier runs commands through sudo
    assert not host.file("/root/.ssh/authorized_keys").exists


def test_service_runs_as_non_root(mirror_host):
    host = mirror_host
    if _manager(host) == "systemd":
        svc = host.service(SERVICE)
        assert svc.is_running
        assert svc.is_enabled
        assert host.check_output(f"systemctl show -p User --value {SERVICE}") == USER
        assert host.check_output(f"systemctl show -p NoNewPrivileges --value {SERVICE}") == "yes"
        assert host.check_output(f"systemctl show -p ProtectSystem --value {SERVICE}") == "strict"
    else:
        assert "RUNNING" in host.check_output(f"supervisorctl status {SERVICE}")
        assert not host.file(f"/etc/systemd/system/{SERVICE}.service").exists
    pid = _main_pid(host)
    assert pid > 0
    # the program and every child (Spark driver JVM) run as the service user
    users = host.check_output(f"ps -o user= --pid {pid} --ppid {pid}").split()
    assert users and set(users) == {USER}
    java = host.check_output(f"pgrep -u {USER} -f java || true")
    assert java, "no JVM of the service user"


def _aliases(host):
    hv = _hostvars(host)
    return hv["mirror_source_alias"], hv["mirror_destination_alias"]


def test_files_owners_and_modes(mirror_host):
    host = mirror_host
    conf = host.file("/etc/kafka-mirror/mm2.properties")
    assert conf.user == USER and conf.mode == 0o600
    src, dst = _aliases(host)
    assert f"{src}->{dst}.enabled=true" in conf.content_string.splitlines()
    d = host.file("/etc/kafka-mirror")
    assert d.user == "root" and d.group == USER and d.mode == 0o750
    state = host.file("/var/lib/kafka-mirror")
    assert state.user == USER and state.mode == 0o750
    jar = host.file("/opt/kafka-mirror/jmx/jmx_prometheus_javaagent-1.0.1.jar")
    assert jar.exists and jar.user == "root"


PROPERTY_READER = """
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.Properties;

public class PropertyReadBack {
    public static void main(String[] args) throws Exception {
        Properties properties = new Properties();
        try (InputStream in = Files.newInputStream(Path.of(args[0]))) {
            properties.load(in);
        }
        String value = properties.getProperty(args[1]);
        if (value == null) {
            System.exit(3);
        }
        System.out.println(HexFormat.of().formatHex(value.getBytes(StandardCharsets.UTF_8)));
    }
}
"""


def _java_read_back(host, tmp_path, path, key):
    """The value of ``key`` in the properties file ``path`` on the host, as Java's Properties.load()
    (how Kafka, its FileConfigProvider and MirrorMaker 2 read it) gives it back."""
    import shutil
    import subprocess

    if not (tmp_path / "PropertyReadBack.class").exists():
        source = tmp_path / "PropertyReadBack.java"
        source.write_text(PROPERTY_READER, encoding="utf-8")
        javac = shutil.which("javac")
        assert javac, "the controller needs a JDK (javac) to build the read-back probe"
        subprocess.run([javac, "--release", "17", "-d", str(tmp_path), str(source)], check=True)
        host.ansible("copy", f"src={tmp_path / 'PropertyReadBack.class'} dest=/tmp/ mode=0644",
                     check=False)
    out = host.check_output(f"java -cp /tmp PropertyReadBack {path} {key}")
    return bytes.fromhex(out.strip()).decode("utf-8")


def test_property_values_read_back_by_java(mirror_host, tmp_path):
    """A value with backslash, quotes, # = : ! $ { and non-ASCII reaches mm2.properties so that
    Java's Properties.load() (how Kafka and MirrorMaker 2 read it) gives it back byte for byte."""
    host = mirror_host
    key = "x.kafka-mirror.escape.check"
    custom = _hostvars(host).get("mirror_custom_properties") or {}
    if key not in custom:
        pytest.skip(f"{key} is set in the default scenario only")
    assert _java_read_back(host, tmp_path, "/etc/kafka-mirror/mm2.properties", key) == custom[key]
    content = host.file("/etc/kafka-mirror/mm2.properties").content
    assert all(b < 0x80 for b in content), "mm2.properties must be plain ASCII (\\uXXXX escapes)"


def test_client_secrets_in_their_own_file(mirror_host, tmp_path):
    """A client secret (the destination's truststore password in the default scenario, its SCRAM
    login in the supervisord scenario) is in mm2-secrets.properties (0600, the service user's), read
    back byte for byte as Kafka's FileConfigProvider reads it; mm2.properties holds a reference to it
    through the provider it configures, and no secret. A host without secrets has neither the file
    nor config.providers.
    kafka-mirror resolves it when its check-config validates the file and when it starts (both
    fail on a reference it cannot resolve), and the escape-check value's ${env:HOME}, naming a
    provider not configured, stays; stock MirrorMaker 2 starts with the provider configured (an
    unresolved reference would stay as text there, so its resolution is not shown here)."""
    host = mirror_host
    hv = _hostvars(host)
    alias = hv.get("mirror_destination_alias", "dst")
    secret = hv.get("mirror_destination_ssl_truststore_password") or ""
    key = f"{alias}.ssl.truststore.password"
    if hv.get("mirror_destination_sasl_password"):
        secret, key = hv["mirror_destination_sasl_password"], f"{alias}.sasl.jaas.config"
    conf_path, secrets_path = "/etc/kafka-mirror/mm2.properties", "/etc/kafka-mirror/mm2-secrets.properties"
    conf = host.file(conf_path).content_string
    secrets = host.file(secrets_path)
    if not secret:
        assert not secrets.exists
        assert "config.providers" not in conf
        return
    assert (secrets.user, secrets.mode) == (USER, 0o600)
    read_back = _java_read_back(host, tmp_path, secrets_path, key)
    if key.endswith(".sasl.jaas.config"):   # the login module's options hold it
        assert f'password="{secret}"' in read_back, key
    else:
        assert read_back == secret
    assert secret not in conf
    assert _java_read_back(host, tmp_path, conf_path, key) == f"${{kafkamirrorsecrets:{secrets_path}:{key}}}"
    assert _java_read_back(host, tmp_path, conf_path, "config.providers") == "kafkamirrorsecrets"
    assert (_java_read_back(host, tmp_path, conf_path, "config.providers.kafkamirrorsecrets.class")
            == "org.apache.kafka.common.config.provider.FileConfigProvider")
    assert "s3cr" not in conf


def test_binary_file_copied_byte_for_byte(mirror_host):
    host = mirror_host
    local = os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule/_shared/files/binary.keytab")
    import hashlib

    want = hashlib.sha256(open(local, "rb").read()).hexdigest()
    f = host.file("/etc/kafka-mirror/test-binary.keytab")
    assert f.user == USER and f.mode == 0o400
    assert f.sha256sum == want


def test_connector_jars_are_the_controller_ones(mirror_host):
    """Whatever the source (controller directory or Maven repository URL), the host has exactly the
    connector jars of the build, byte for byte, owned by root."""
    host = mirror_host
    hv = _hostvars(host)
    if hv.get("mirror_engine", "kafka_mirror") != "kafka_mirror":
        pytest.skip("no Spark connector jars for stock MirrorMaker 2")
    import hashlib
    import pathlib

    mol_home = os.environ.get("MOL_HOME", "/tmp/kafka-mirror-molecule")
    want = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in pathlib.Path(mol_home, "artifacts", "connector-jars").glob("*.jar")}
    assert want
    d = "/opt/kafka-mirror/connector-jars"
    got = host.check_output(f"cd {d} && sha256sum *.jar").splitlines()
    assert {name: digest for digest, name in (line.split() for line in got)} == want
    for name in want:
        f = host.file(f"{d}/{name}")
        assert (f.user, f.group, f.mode) == ("root", "root", 0o644)


def test_jmx_exporter_answers(mirror_host):
    """At its bind address (all addresses by default), over HTTPS with basic authentication when set."""
    host = mirror_host
    hv = _hostvars(host)
    port = int(hv.get("mirror_jmx_exporter_port", 9404))
    bind = str(hv.get("mirror_jmx_exporter_bind_address") or "0.0.0.0")
    if bind == "0.0.0.0":
        assert host.socket(f"tcp://0.0.0.0:{port}").is_listening or host.socket(f"tcp://:::{port}").is_listening
        bind = "127.0.0.1"
    scheme = "https" if hv.get("mirror_jmx_exporter_tls_keystore_src") else "http"
    curl = ["curl", "-sf", "-k"] if scheme == "https" else ["curl", "-sf"]
    user = hv.get("mirror_jmx_exporter_basic_auth_username")
    if user:
        curl += ["-u", f"{user}:{hv.get('mirror_jmx_exporter_basic_auth_password', '')}"]
    curl.append(f"{scheme}://{bind}:{port}/metrics")
    out = ""
    for _ in range(30):
        out = host.run(" ".join(shlex.quote(a) for a in curl)).stdout
        if "jvm_" in out:
            break
        time.sleep(2)
    assert "jvm_" in out or "java_lang_" in out


def test_records_mirrored_with_partitions(mirror_host, read_mirrored):
    """Produce to chosen partitions of a selected source topic; the same records appear on the
    destination topic (DefaultReplicationPolicy name: this host's source alias) in the same partitions."""
    from confluent_kafka import Producer

    topic = "molecule.orders"  # created by the scenario's prepare step with 3 partitions
    marker = uuid.uuid4().hex
    p = Producer({"bootstrap.servers": SOURCE})
    sent = {}
    for i in range(30):
        part = i % 3
        key = f"{marker}-{i}".encode()
        p.produce(topic, key=key, value=b"v%d" % i, partition=part)
        sent[key] = part
    assert p.flush(30) == 0

    src, _ = _aliases(mirror_host)
    got = read_mirrored(f"{src}.{topic}", sent, f"molecule-{marker}", 240,
                        **{"topic.metadata.refresh.interval.ms": 2000})
    assert len(got) == len(sent), f"{len(got)}/{len(sent)} records mirrored"
    assert got == sent


def _metrics_port(host):
    """kafka-mirror's endpoint port, or None (stock MirrorMaker 2, or mirror_metrics_enabled false)."""
    hv = _hostvars(host)
    if hv.get("mirror_engine", "kafka_mirror") != "kafka_mirror" or not hv.get("mirror_metrics_enabled", True):
        return None
    return int(hv.get("mirror_metrics_port", 9405))


def _endpoint_access(host):
    """How the host's metrics endpoint is read: (scheme, basic auth (user, password) or None)."""
    hv = _hostvars(host)
    scheme = "https" if hv.get("mirror_metrics_tls_keystore_src") else "http"
    user = hv.get("mirror_metrics_basic_auth_username")
    return scheme, ((user, hv.get("mirror_metrics_basic_auth_password", "")) if user else None)


def _get(url, timeout=5, auth=None):
    """(status, body) of a GET from the controller; status 0 when nothing answers. HTTPS is checked
    against the Molecule test CA (molecule/default/prepare.yml); ``auth`` is (user, password)."""
    import base64
    import ssl
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url)
    if auth:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    context = None
    if url.startswith("https:"):
        mol_home = os.environ.get("MOL_HOME") or "/tmp/kafka-mirror-molecule"
        context = ssl.create_default_context(cafile=os.path.join(mol_home, "metrics-tls", "ca.pem"))
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def _records_total(text):
    """kafka_mirror_records_total per flow label, from the Prometheus text format (prometheus_client's parser)."""
    from prometheus_client.parser import text_string_to_metric_families

    totals = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "kafka_mirror_records_total":
                totals[sample.labels["flow"]] = totals.get(sample.labels["flow"], 0) + sample.value
    return totals


def test_metrics_endpoint_on_the_host(mirror_host):
    """kafka-mirror's endpoint listens on mirror_metrics_port (not the JMX exporter's 9404) and answers
    on the host; the port and bind address come from mm2.properties."""
    host = mirror_host
    port = _metrics_port(host)
    if port is None:
        pytest.skip("no kafka-mirror metrics endpoint on this host")
    conf = host.file("/etc/kafka-mirror/mm2.properties").content_string.splitlines()
    assert f"mirror.metrics.port={port}" in conf
    assert "mirror.metrics.bind.address=0.0.0.0" in conf
    assert port != 9404
    scheme, auth = _endpoint_access(host)
    curl = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}"]
    if scheme == "https":  # the endpoint's certificate, checked against the test CA on the host
        curl += ["--cacert", "/etc/ssl/kafka-mirror-molecule-ca.pem"]
        # no password in mm2.properties: only its salted hash (and the key store's in the secrets file)
        assert "mirror.metrics.basic.auth.password.hash=" in "\n".join(conf)
        assert auth[1] not in "\n".join(conf)
        plain = host.run(f"curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}/health/live")
        assert plain.stdout in ("000", ""), plain.stdout  # plain HTTP gets no answer
    live = f"{scheme}://127.0.0.1:{port}/health/live"
    if auth:
        denied = host.run(" ".join(shlex.quote(a) for a in [*curl, live])).stdout
    status = ""
    for _ in range(60):
        status = host.run(" ".join(shlex.quote(a) for a in
                                   [*curl, *(["-u", f"{auth[0]}:{auth[1]}"] if auth else []), live])).stdout
        if status == "200":
            break
        time.sleep(2)
    assert status == "200"
    if auth:
        assert denied == "401", denied
    assert host.socket(f"tcp://0.0.0.0:{port}").is_listening


def test_metrics_scraped_from_the_controller(mirror_host, tmp_path):
    """The collection's monitoring entry point lists this host in a Prometheus file_sd file; from the
    controller, every listed target's /metrics parses with the Prometheus text parser and counts the
    records mirrored (kafka_mirror_records_total > 0), and /health/ready answers 200."""
    import subprocess

    import yaml
    from confluent_kafka import Producer

    host = mirror_host
    port = _metrics_port(host)
    if port is None:
        pytest.skip("no kafka-mirror metrics endpoint on this host")
    inventory = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
    playbook = os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "molecule", "_shared", "monitoring.yml")
    run = subprocess.run(["ansible-playbook", "-i", inventory, "-e", f"monitoring_dir={tmp_path}", playbook],
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    entries = yaml.safe_load((tmp_path / "file_sd" / "kafka-mirror.yml").read_text())
    hv = _hostvars(host)
    name = hv["inventory_hostname"]
    mine = [e for e in entries if e["labels"]["mirror_host"] == name]
    address = hv.get("ansible_host") or name
    assert mine == [{"targets": [f"{address}:{port}"], "labels": {"mirror_host": name}}], entries

    # records to count, in case nothing was mirrored yet
    p = Producer({"bootstrap.servers": SOURCE})
    for i in range(10):
        p.produce("molecule.orders", key=b"metrics-%d" % i, value=b"m", partition=i % 3)
    assert p.flush(30) == 0
    target = mine[0]["targets"][0]
    src, dst = _aliases(host)
    scheme, auth = _endpoint_access(host)
    if auth:  # every path needs the login, the probes too
        assert _get(f"{scheme}://{target}/health/ready")[0] == 401
        assert _get(f"{scheme}://{target}/metrics", auth=(auth[0], "wrong"))[0] == 401
    totals, ready = {}, (0, "")
    for _ in range(90):
        status, text = _get(f"{scheme}://{target}/metrics", auth=auth)
        totals = _records_total(text) if status == 200 else {}
        ready = _get(f"{scheme}://{target}/health/ready", auth=auth)
        if totals.get(f"{src}->{dst}", 0) > 0 and ready[0] == 200:
            break
        time.sleep(2)
    assert totals.get(f"{src}->{dst}", 0) > 0, totals
    assert ready[0] == 200, ready
    import json

    report = json.loads(ready[1])
    assert report["ready"] is True and report["flows"][f"{src}->{dst}"]["ready"] is True, report
