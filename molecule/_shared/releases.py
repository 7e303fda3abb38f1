"""Releases for the upgrade verifiers (scenarios "kerberos" and "supervisord"): the previous release's
bundle built from its own tree, and the rollback to it then the upgrade back, under produce, checked
(docs/ansible.md, "Upgrades" and "Releases"). The verifiers' conftest.py puts this directory on sys.path."""

import json
import os
import re
import shutil
import subprocess
import time

import yaml
from packaging.version import Version

MOL_HOME = os.environ.get("MOL_HOME") or "/tmp/kafka-mirror-molecule"
REPO = os.environ.get("MOLECULE_PROJECT_DIRECTORY", "")
SNAPSHOTS = "/var/lib/kafka-mirror-snapshots"
VENV = "/opt/kafka-mirror/venv"
CURRENT_BUNDLE = os.path.join(MOL_HOME, "artifacts", "bundle", "kafka-mirror-bundle-current")


def bundle_version(bundle):
    with open(os.path.join(bundle, "bundle.json")) as fh:
        return json.load(fh)["version"]


def previous_release(version):
    """The newest release of the changelog before ``version`` (this tree's)."""
    with open(os.path.join(REPO, "changelogs", "changelog.yaml"), encoding="utf-8") as fh:
        releases = yaml.safe_load(fh)["releases"]
    older = sorted((Version(v) for v in releases if Version(v) < Version(version)), reverse=True)
    assert older, f"changelogs/changelog.yaml has no release before {version}"
    return str(older[0])


def _git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=False)


def release_commit(release):
    """The commit of release ``release``: its tag ``v<release>`` when the clone has tags, else the commit
    of this branch's history that set ``galaxy.yml`` to that version (a clone of one branch, as CI makes,
    has the history but not the tags); a shallow clone is deepened first (else its oldest commit would
    seem to set every line)."""
    tagged = _git("rev-parse", "--verify", "--quiet", f"v{release}^{{commit}}")
    if tagged.returncode == 0:
        return tagged.stdout.strip()
    if _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        _git("fetch", "--quiet", "--unshallow")
    pattern = "^version: " + release.replace(".", "\\.") + "$"
    found = _git("log", "--reverse", "--format=%H", "-G", pattern, "HEAD", "--", "galaxy.yml").stdout.split()
    if found and _git("rev-parse", "--is-shallow-repository").stdout.strip() == "false":
        return found[0]
    raise AssertionError(f"release {release}: no tag v{release} and no commit of HEAD's history in {REPO} "
                         f"sets galaxy.yml to version {release} (git fetch --tags, or a clone with history)")


# the JVM modules whose jars a bundle's connector-jars/ holds (jvm/spark-connector/target/lib: the
# connector, its dependencies and these of our modules), and their parent's build settings
CONNECTOR_JAR_MODULES = ("jvm/spark-connector", "jvm/interceptor", "jvm/source")


def _connector_jars_same(commit):
    """Whether ``commit``'s build would make the connector jars this tree's build made: the modules they
    come from are the same, and the parent POM differs at most in its list of modules (which modules a
    build makes, not how: stop 56's jvm/bench-producer, which no bundle holds, made every build of
    release 0.2.0 compile all JVM modules again)."""
    if _git("diff", "--quiet", commit, "HEAD", "--", *CONNECTOR_JAR_MODULES).returncode != 0:
        return False
    parent = _git("diff", "-U0", commit, "HEAD", "--", "jvm/pom.xml")
    changed = [line for line in parent.stdout.splitlines()
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    return parent.returncode == 0 and all(re.fullmatch(r"[+-]\s*<module>[\w.-]+</module>\s*", line)
                                          for line in changed)


def build_release(release, out):
    """Release ``release``'s bundle, built by its own scripts/build-bundle.sh from its own tree (its
    commit, exported with git archive), under ``out``; returns the bundle's directory."""
    commit = release_commit(release)
    shown = _git("show", f"{commit}:galaxy.yml").stdout
    assert f"\nversion: {release}\n" in shown, f"{commit}'s galaxy.yml is not at version {release}"
    os.makedirs(out, exist_ok=True)
    tree = os.path.join(out, f"kafka-mirror-{release}")
    began = time.monotonic()
    shutil.rmtree(tree, ignore_errors=True)
    os.makedirs(tree)
    subprocess.run(f"git -C '{REPO}' archive --format=tar {commit} | tar -x -C '{tree}'", shell=True, check=True)
    # what that build would make again from the same inputs, taken from this tree's build (hard
    # links): the wheelhouse (its build script reuses it when the wheel's requirements are the
    # same, else it builds its own) and, when the JVM modules' sources are the same, their jars
    cache = os.path.join(REPO, "build", "bundle-cache", "wheelhouse")
    if os.path.isdir(cache):
        os.makedirs(os.path.join(tree, "build", "bundle-cache"))
        shutil.copytree(cache, os.path.join(tree, "build", "bundle-cache", "wheelhouse"), copy_function=os.link)
    jars = os.path.join(REPO, "jvm", "spark-connector", "target", "lib")
    if _connector_jars_same(commit) and os.path.isdir(jars):
        shutil.copytree(jars, os.path.join(tree, "jvm", "spark-connector", "target", "lib"), copy_function=os.link)
    build = subprocess.run([os.path.join(tree, "scripts", "build-bundle.sh"), "--out", out],
                           capture_output=True, text=True, timeout=1500, check=False)
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    print(f"release {release}'s bundle built from {commit[:12]} in {time.monotonic() - began:.0f} s")
    bundle = os.path.join(out, f"kafka-mirror-bundle-{release}")
    assert bundle_version(bundle) == release
    return bundle


def installed(host):
    return host.check_output(f"{VENV}/bin/python -c 'import kafka_mirror; print(kafka_mirror.__version__)'").strip()


def main_pid(host):
    if host.ansible.get_variables().get("mirror_service_manager", "systemd") == "systemd":
        return int(host.check_output("systemctl show -p MainPID --value kafka-mirror"))
    return int(host.check_output("supervisorctl pid kafka-mirror").strip())


def snapshots(host):
    return sorted(host.check_output(f"ls -1 {SNAPSHOTS}").split())


def rollback_then_upgrade(host, site, site_under_produce, assert_each_once):
    """On ``host`` (the kafka_mirror engine, on the scenario's bundle N): N-1's bundle refused without
    mirror_allow_downgrade (nothing changes), the rollback to N-1 with it, then the upgrade back to N,
    each run by ``site_under_produce(*extra_args)`` (the run, the records sent meanwhile) and its
    records checked by ``assert_each_once(sent)``; ``site(*extra_args)`` runs kafka.mirror.site alone."""
    name = host.ansible.get_variables()["inventory_hostname"]
    version = bundle_version(os.path.realpath(CURRENT_BUNDLE))
    previous = previous_release(version)
    old = build_release(previous, os.path.join(MOL_HOME, "artifacts", "previous-release"))
    assert installed(host) == version
    before = snapshots(host)

    # N-1's bundle: the preflight refuses the older version, nothing changes
    pid = main_pid(host)
    refused = site("-e", f"kafka_mirror_bundle_dir={old}")
    assert refused.returncode != 0
    # the task's failure goes to stderr ([ERROR]: Task failed: ...)
    assert (f"{name} runs kafka-mirror {version}; kafka_mirror-{previous}-py3-none-any.whl is older ({previous}): "
            "for a rollback to it set mirror_allow_downgrade=true") in refused.stdout + refused.stderr, \
        refused.stdout[-2000:] + refused.stderr[-2000:]
    assert installed(host) == version
    assert main_pid(host) == pid

    # the rollback to N-1, then the upgrade back to N (the scenario's bundle): each planned per host,
    # the instance stopped, its state archived (one snapshot per run, named for the version it ran),
    # started on the other installation and waited for
    for args, old_version, new_version in ((("-e", f"kafka_mirror_bundle_dir={old}", "-e", "mirror_allow_downgrade=true"),
                                            version, previous), ((), previous, version)):
        run, sent = site_under_produce(*args)
        assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
        assert f"{name}: kafka-mirror {old_version} -> {new_version}, pyspark " in run.stdout, run.stdout[-4000:]
        assert f'"msg": "{name}: kafka-mirror restarted; ' in run.stdout
        assert installed(host) == new_version
        assert main_pid(host) != pid
        pid = main_pid(host)
        taken = [s for s in snapshots(host) if s not in before]
        assert len([s for s in taken if s.startswith(f"kafka-mirror-{old_version}-")]) == 1, taken
        before += taken
        members = host.check_output(f"tar -tzf {SNAPSHOTS}/{taken[-1]}").split()
        assert any(m.endswith("/target-ends.json") for m in members), members[:40]
        assert not [m for m in members if m.startswith(("./spark-local/", "./class-data/"))]
        assert len(sent) > 300
        assert_each_once(sent)
