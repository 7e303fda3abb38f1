"""The mirror role's JMX exporter settings against the real agent (jmx_prometheus_javaagent 1.0.1).

1. A throw-away PKCS12 keystore (keytool; its certificate names 127.0.0.1) and a salt that makes
   SHA-256(salt:password) start with a 0 digit (the agent compares a hex string without leading zeros).
2. tests/integration/jmx_exporter.yml renders the role's jmx-exporter.yml.j2 and -javaagent argument
   (tls_auth: HTTPS + basic authentication + 127.0.0.1; auth: basic authentication, all addresses;
   default: neither) through Ansible, with the collection as it ships.
3. A small JVM (a class that sleeps) with the real agent and the rendered argument, verbatim:
   tls_auth: HTTPS with the right credentials -> 200 with JVM metrics; a wrong password, none, or
   another user -> 401; plain HTTP -> no answer; 127.0.0.2 -> refused (bound to 127.0.0.1 only).
   auth: plain HTTP with the right credentials -> 200, also on 127.0.0.2 (all addresses); wrong -> 401.
4. kafka.mirror.rolling_restart (stock MirrorMaker 2 under supervisord) restarts the tls_auth JVM
   through a stand-in supervisorctl and waits for its exporter over HTTPS, with basic authentication,
   the certificate checked against kafka_mirror_restart_jmx_ca_path; the password never in its output.
JVMs are stopped by their PID. Loopback only.

Usage: jmx_exporter.py COLLECTIONS_PATH WORK_DIR   (COLLECTIONS_PATH holds ansible_collections/kafka/mirror)
The agent jar: $JMX_EXPORTER_JAR, else ~/.m2 (fetched with mvn when absent).
"""

import base64
import hashlib
import json
import os
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERSION = "1.0.1"
USER = "prometheus"
PASSWORD = "jmx-Pa55:w0rd \"#$%&'()*+,-./;<=>?@[\\]^_`{|}~"  # ASCII punctuation, a colon, a space
WRONG = "jmx-Pa55:w0rd"
STORE_PASSWORD = "st0re \"pa$$:word\" #{x}"

pids = []  # JVMs to stop (by PID) at the end
supervised = []  # the stand-in supervisorctl's pid file


def log(msg):
    print(f"jmx_exporter: {msg}", flush=True)


def agent_jar():
    jar = os.environ.get("JMX_EXPORTER_JAR") or str(
        Path.home() / f".m2/repository/io/prometheus/jmx/jmx_prometheus_javaagent/{VERSION}"
        / f"jmx_prometheus_javaagent-{VERSION}.jar")
    if not Path(jar).is_file():
        subprocess.run(["mvn", "-q", "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:get",
                        f"-Dartifact=io.prometheus.jmx:jmx_prometheus_javaagent:{VERSION}",
                        "-Dtransitive=false"], check=True)
    return jar


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def salt_with_leading_zero():
    for i in range(10000):
        salt = f"salt{i}"
        if hashlib.sha256(f"{salt}:{PASSWORD}".encode()).hexdigest().startswith("0"):
            return salt
    raise SystemExit("no salt found")


def java_cmd(work, agent_arg):
    return ["java", "-Xmx32m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", agent_arg,
            "-cp", str(work), "Sleep"]


def start_jvm(work, name, agent_arg):
    out = open(work / f"{name}.log", "wb")
    p = subprocess.Popen(java_cmd(work, agent_arg), stdout=out, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    pids.append(p.pid)
    return p


def stop(pid):
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for dummy in range(100):
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:  # not our child (started by the stand-in supervisorctl)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


def get(url, auth=None, ctx=None, timeout=5):
    """(status, body) of a GET; an exception for no HTTP answer."""
    req = urllib.request.Request(url)
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, ""


def wait_up(url, auth, ctx, proc, name, work):
    deadline = time.time() + 40
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{name}: the JVM exited ({proc.returncode}): "
                                 + (work / f"{name}.log").read_text(errors="replace")[-3000:])
        try:
            status, body = get(url, auth, ctx)
            if status == 200:
                return body
        except (OSError, ssl.SSLError):
            pass
        time.sleep(0.3)
    raise AssertionError(f"{name}: {url} did not answer 200 within 40 s")


def no_answer(url, auth=None, ctx=None):
    """The exception a GET raises (None when it answered)."""
    try:
        status = get(url, auth, ctx, timeout=3)[0]
        return None if status else "no status"
    except Exception as e:  # noqa: BLE001 - any failure to get an HTTP answer is the point
        return e


def main():
    collections_path, work = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    collection = collections_path / "ansible_collections/kafka/mirror"
    work.mkdir(parents=True, exist_ok=True)
    jar = agent_jar()
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path))

    # the keystore, its certificate (trusted by the clients), the JVM's class
    keystore, cert = work / "exporter.p12", work / "exporter.pem"
    for f in (keystore, cert):
        f.unlink(missing_ok=True)
    subprocess.run(["keytool", "-genkeypair", "-alias", "exporter", "-keyalg", "EC", "-groupname", "secp256r1",
                    "-dname", "CN=127.0.0.1", "-ext", "SAN=ip:127.0.0.1,dns:localhost", "-validity", "2",
                    "-storetype", "PKCS12", "-keystore", str(keystore), "-storepass", STORE_PASSWORD],
                   check=True, capture_output=True)
    subprocess.run(["keytool", "-exportcert", "-rfc", "-alias", "exporter", "-keystore", str(keystore),
                    "-storepass", STORE_PASSWORD, "-file", str(cert)], check=True, capture_output=True)
    (work / "Sleep.java").write_text(
        "public class Sleep { public static void main(String[] a) throws Exception { Thread.sleep(Long.MAX_VALUE); } }\n")
    subprocess.run(["javac", "-d", str(work), str(work / "Sleep.java")], check=True)

    salt = salt_with_leading_zero()
    ports = {"tls_auth": free_port(), "auth": free_port(), "default": free_port()}
    extra = {
        "jmx_dir": str(work), "jmx_collection_dir": str(collection), "jmx_ports": ports,
        "jmx_password": PASSWORD, "jmx_salt": salt, "jmx_keystore": str(keystore),
        "jmx_keystore_password": STORE_PASSWORD,
        "mirror_wheel": "/nonexistent/kafka_mirror-0.1.0-py3-none-any.whl",
        "mirror_source_bootstrap_servers": ["127.0.0.1:1"], "mirror_destination_bootstrap_servers": ["127.0.0.1:2"],
        "mirror_install_dir": str(work / "install"), "mirror_jmx_exporter_jar_src": jar,
    }
    (work / "extra.json").write_text(json.dumps(extra))
    t0 = time.time()
    r = subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local",
                        "-e", f"ansible_python_interpreter={sys.executable}", "-e", f"@{work / 'extra.json'}",
                        str(HERE / "jmx_exporter.yml")], env=env, capture_output=True, text=True, timeout=180, check=False)
    (work / "render.log").write_text(r.stdout + r.stderr)
    if r.returncode != 0:
        print(r.stdout[-6000:], r.stderr[-3000:])
        raise SystemExit("jmx_exporter.yml failed")
    log(f"rendered with the role's template and argument ({time.time() - t0:.0f} s)")

    # where the role puts the jar and the keystore: the rendered argument and file are used verbatim
    agent = {c: (work / f"{c}.agent").read_text().strip() for c in ports}
    jar_dst = work / "install/jmx" / f"jmx_prometheus_javaagent-{VERSION}.jar"
    jar_dst.parent.mkdir(parents=True, exist_ok=True)
    jar_dst.write_bytes(Path(jar).read_bytes())
    (work / "conf-tls_auth/jmx-exporter.keystore").write_bytes(keystore.read_bytes())
    conf = (work / "conf-tls_auth/jmx-exporter.yml").read_text()
    assert PASSWORD not in conf and "passwordHash" in conf and "algorithm: SHA-256" in conf, conf
    digest = hashlib.sha256(f"{salt}:{PASSWORD}".encode()).hexdigest()
    assert f'passwordHash: "{digest.lstrip("0")}"' in conf, (digest, conf)
    assert agent["tls_auth"] == f"-javaagent:{jar_dst}=127.0.0.1:{ports['tls_auth']}:{work}/conf-tls_auth/jmx-exporter.yml"
    assert agent["default"] == f"-javaagent:{jar_dst}={ports['default']}:{work}/conf-default/jmx-exporter.yml"
    log(f"agent argument: {agent['tls_auth']}")
    log(f"hash of the password: {digest[:6]}... written without its leading zero(s)")

    ctx = ssl.create_default_context(cafile=str(cert))
    right, wrong = (USER, PASSWORD), (USER, WRONG)
    port_a, port_b = ports["tls_auth"], ports["auth"]
    a = start_jvm(work, "tls_auth", agent["tls_auth"])
    b = start_jvm(work, "auth", agent["auth"])

    # HTTPS + basic authentication + 127.0.0.1
    url = f"https://127.0.0.1:{port_a}/metrics"
    body = wait_up(url, right, ctx, a, "tls_auth", work)
    assert "jvm_memory_used_bytes" in body or "jvm_" in body, body[:500]
    log(f"tls_auth: {url} with the right credentials: 200, {body.count(chr(10))} lines of JVM metrics")
    for what, auth in (("a wrong password", wrong), ("no credentials", None), ("another user", ("admin", PASSWORD))):
        status = get(url, auth, ctx)[0]
        assert status == 401, (what, status)
        log(f"tls_auth: {what}: {status}")
    err = no_answer(f"http://127.0.0.1:{port_a}/metrics", right)
    assert err is not None, "plain HTTP answered"
    log(f"tls_auth: plain http: no answer ({type(err).__name__})")
    err = no_answer(f"https://127.0.0.2:{port_a}/metrics", right, ctx)
    assert isinstance(err, ConnectionRefusedError) or isinstance(getattr(err, "reason", None), ConnectionRefusedError), err
    log(f"tls_auth: 127.0.0.2:{port_a}: refused (bound to 127.0.0.1 only)")

    # basic authentication, salt derived from host and user, all addresses
    for host in ("127.0.0.1", "127.0.0.2"):
        url = f"http://{host}:{port_b}/metrics"
        body = wait_up(url, right, None, b, "auth", work)
        assert "jvm_" in body
        status = get(url, wrong)[0]
        assert status == 401, status
        log(f"auth: {url}: 200 with the right credentials, 401 with a wrong password")
    stop(b.pid)
    pids.remove(b.pid)

    # kafka.mirror.rolling_restart: restarts the tls_auth JVM (stand-in supervisorctl), waits for HTTPS
    pidfile = work / "supervised.pid"
    pidfile.write_text(str(a.pid))
    supervised.append(pidfile)
    bindir = work / "bin"
    bindir.mkdir(exist_ok=True)
    cmd = " ".join(shlex.quote(x) for x in java_cmd(work, agent["tls_auth"]))
    (bindir / "supervisorctl").write_text(f"""#!/bin/bash
# stand-in for supervisorctl: restart / status of the JVM with the exporter (pid in {pidfile})
pidfile={shlex.quote(str(pidfile))}
pid=$(cat "$pidfile" 2>/dev/null)
case "$1" in
  restart)
    # gone, or a zombie (the first JVM is the test's child: reaped by the test later)
    if [ -n "$pid" ]; then
      kill "$pid" 2>/dev/null
      for _ in $(seq 300); do
        case "$(ps -o stat= -p "$pid" 2>/dev/null)" in ''|Z*) break ;; esac
        sleep 0.1
      done
    fi
    setsid {cmd} >{shlex.quote(str(work / 'restarted.log'))} 2>&1 </dev/null &
    echo $! >"$pidfile"; echo "$2: stopped"; echo "$2: started" ;;
  status)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo "$2 RUNNING pid $pid"; else echo "$2 STOPPED"; exit 3; fi ;;
esac
""")
    (bindir / "supervisorctl").chmod(0o755)
    inventory = {"mirror": {"hosts": {"jmx-host": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "ansible_become": False,
        "mirror_engine": "mirrormaker2", "mirror_service_manager": "supervisord",
        "mirror_jmx_exporter_port": port_a, "mirror_jmx_exporter_bind_address": "127.0.0.1",
        "mirror_jmx_exporter_basic_auth_username": USER, "mirror_jmx_exporter_basic_auth_password": PASSWORD,
        "mirror_jmx_exporter_tls_keystore_src": str(keystore),
        "kafka_mirror_restart_jmx_ca_path": str(cert),
        "kafka_mirror_restart_retries": 20, "kafka_mirror_restart_pause": 0}}}}
    (work / "inventory.json").write_text(json.dumps(inventory))
    a_pid = a.pid
    t0 = time.time()
    r = subprocess.run(["ansible-playbook", "-v", "-i", str(work / "inventory.json"), "kafka.mirror.rolling_restart"],
                       env=dict(env, PATH=f"{bindir}:{env['PATH']}"), capture_output=True, text=True, timeout=180, check=False)
    out = r.stdout + r.stderr
    (work / "rolling_restart.log").write_text(out)
    new_pid = int(pidfile.read_text())
    a.wait(timeout=30)  # stopped by the stand-in: reap it
    pids.remove(a_pid)
    if r.returncode != 0:
        print(out[-6000:])
        raise SystemExit("kafka.mirror.rolling_restart failed")
    assert PASSWORD not in out, "the exporter password shows up in the rolling restart's output"
    task = out.split("Wait for the JMX exporter to answer again", 1)[1].split("TASK [", 1)[0]
    assert f'"url": "https://127.0.0.1:{port_a}/metrics"' in task and "ok: [jmx-host]" in task, task
    assert new_pid != a_pid
    status, body = get(f"https://127.0.0.1:{port_a}/metrics", right, ctx)
    assert status == 200 and "jvm_" in body, status
    log(f"rolling_restart: pid {a_pid} -> {new_pid}, waited for https://127.0.0.1:{port_a}/metrics with basic "
        f"authentication, certificate checked ({time.time() - t0:.0f} s); no password in its -v output")
    log("all checks passed")


def _terminated(signum, _frame):
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminated)
    try:
        main()
    finally:
        for f in supervised:
            if f.is_file() and f.read_text().strip().isdigit() and int(f.read_text()) not in pids:
                pids.append(int(f.read_text()))
        for pid in pids:
            stop(pid)
