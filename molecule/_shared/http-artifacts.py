"""Build the tree artifact-server.sh serves to the Molecule hosts: stand-ins for the Apache download
site and for a Maven repository, which the test hosts (and often this machine) cannot reach.

    http-artifacts.py ARTIFACTS_DIR KAFKA_TGZ

Output, under ARTIFACTS_DIR/http (same paths as on archive.apache.org/dist and Maven Central):
  kafka/<v>/kafka_2.13-<v>.tgz (+ .sha512)        the Kafka tarball prepare-controller.sh assembled
  spark/spark-<v>/spark-<v>-bin-hadoop3.tgz (+ .sha512)
                                                  a Spark distribution assembled from the pyspark wheel
  maven/<group path>/<artifact>/<version>/<artifact>-<version>.jar (+ .sha1, .sha256)
                                                  the Spark Kafka connector jars (ARTIFACTS_DIR/connector-jars)
and ARTIFACTS_DIR/maven-artifacts.yml, the spark_connector_artifacts list naming those jars.
Checksum files are in sha512sum format (.sha512) or hex only (Maven .sha1/.sha256).
"""

import hashlib
import io
import os
import re
import sys
import tarfile
import time
import zipfile
from pathlib import Path

A = Path(sys.argv[1])
KAFKA_TGZ = Path(sys.argv[2])
HTTP = A / "http"
M2 = Path(os.environ.get("MAVEN_REPO", Path.home() / ".m2" / "repository"))


def digest(path, algo):
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def link(src, dest):
    """Hard link (same file system) or copy; replaces dest."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:
        tmp.write_bytes(Path(src).read_bytes())
    os.replace(tmp, dest)


def write_text(path, text):
    """Replace path's content with text when it differs, atomically: a scenario running beside this
    one (the test command runs two side by side) may be reading it."""
    if path.exists() and path.read_text() == text:
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def sha512_file(path):
    """<path>.sha512 in sha512sum format, rewritten only when the file changed."""
    out = path.with_name(path.name + ".sha512")
    if out.exists() and out.stat().st_mtime >= path.stat().st_mtime:
        return out.read_text().split()[0]
    hexd = digest(path, "sha512")
    write_text(out, f"{hexd}  {path.name}\n")
    return hexd


# -- Kafka ---------------------------------------------------------------------------------------
m = re.fullmatch(r"kafka_[\d.]+-(.+)\.tgz", KAFKA_TGZ.name)
kafka = HTTP / "kafka" / m.group(1) / KAFKA_TGZ.name
link(KAFKA_TGZ, kafka)
sha512_file(kafka)


# -- Spark distribution ----------------------------------------------------------------------------
# Stand-in for spark-<v>-bin-hadoop3.tgz from archive.apache.org, which is not reachable here: the
# pyspark wheel carries the same bin/, sbin/, jars/ (and data/, examples/, licenses/) as the release,
# and the release's python/lib/pyspark.zip and py4j-*-src.zip are the wheel's Python packages.
def spark_distribution():
    wheels = sorted((A / "wheelhouse").glob("pyspark-*.whl"))
    if not wheels:
        return
    wheel = wheels[-1]
    version = wheel.name.split("-")[1]
    top = f"spark-{version}-bin-hadoop3"
    out = HTTP / "spark" / f"spark-{version}" / f"{top}.tgz"
    if out.exists() and out.stat().st_mtime >= wheel.stat().st_mtime:
        sha512_file(out)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    now = int(time.time())

    def add(tar, name, data=None, mode=0o644, is_dir=False):
        info = tarfile.TarInfo(f"{top}/{name}" if name else top)
        info.mtime, info.uid, info.gid, info.uname, info.gname = now, 0, 0, "root", "root"
        if is_dir:
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        else:
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))

    py_packages = io.BytesIO()
    with zipfile.ZipFile(wheel) as z, zipfile.ZipFile(py_packages, "w", zipfile.ZIP_DEFLATED) as pyzip, \
            tarfile.open(tmp, "w:gz", compresslevel=1) as tar:
        add(tar, "", is_dir=True)
        dirs = {""}
        for info in z.infolist():
            parts = info.filename.split("/")
            if parts[0] != "pyspark" or info.is_dir():
                continue
            if parts[1] in ("bin", "sbin", "jars", "data", "examples", "licenses"):
                rel = "/".join(parts[1:])
                for i in range(1, len(parts) - 1):  # parent directories first
                    d = "/".join(parts[1:i + 1])
                    if d not in dirs:
                        dirs.add(d)
                        add(tar, d, is_dir=True)
                mode = (info.external_attr >> 16) & 0o777 or 0o644
                add(tar, rel, z.read(info), mode=mode | 0o644)
            else:
                pyzip.writestr(info.filename, z.read(info))
        pyzip.close()
        for d in ("conf", "python", "python/lib"):
            add(tar, d, is_dir=True)
        add(tar, "python/lib/pyspark.zip", py_packages.getvalue())
        for py4j in sorted((A / "wheelhouse").glob("py4j-*.whl"))[-1:]:
            src = io.BytesIO()
            with zipfile.ZipFile(py4j) as pz, zipfile.ZipFile(src, "w", zipfile.ZIP_DEFLATED) as sz:
                for info in pz.infolist():
                    if info.filename.startswith("py4j/"):
                        sz.writestr(info.filename, pz.read(info))
            add(tar, f"python/lib/py4j-{py4j.name.split('-')[1]}-src.zip", src.getvalue())
        add(tar, "RELEASE", f"Spark {version} built for Hadoop 3 (Molecule stand-in assembled from "
                            f"{wheel.name})\n".encode())
    os.replace(tmp, out)
    sha512_file(out)


spark_distribution()


# -- Maven repository of the connector jars --------------------------------------------------------
def m2_index():
    index = {}
    if M2.is_dir():
        for root, _, files in os.walk(M2):
            for name in files:
                if name.endswith(".jar"):
                    index.setdefault(name, Path(root) / name)
    return index


def coordinates(jar, index):
    """(group, artifact, version) from the local Maven repository path, else from the jar's pom.properties."""
    if jar.name in index:
        version_dir = index[jar.name].parent
        artifact_dir = version_dir.parent
        return (str(artifact_dir.parent.relative_to(M2)).replace(os.sep, "."), artifact_dir.name,
                version_dir.name)
    with zipfile.ZipFile(jar) as z:
        props = [n for n in z.namelist() if n.startswith("META-INF/maven/") and n.endswith("/pom.properties")]
        if len(props) == 1:
            kv = dict(line.split("=", 1) for line in z.read(props[0]).decode().splitlines()
                      if "=" in line and not line.startswith("#"))
            return kv["groupId"].strip(), kv["artifactId"].strip(), kv["version"].strip()
    sys.exit(f"cannot tell the Maven coordinates of {jar}")


index = m2_index()
artifacts = []
for jar in sorted((A / "connector-jars").glob("*.jar")):
    g, a, v = coordinates(jar, index)
    if jar.name != f"{a}-{v}.jar":
        sys.exit(f"{jar.name} is not named {a}-{v}.jar")
    dest = HTTP / "maven" / g.replace(".", "/") / a / v / jar.name
    link(jar, dest)
    genuine = index.get(jar.name, jar).with_name(jar.name + ".sha1")  # as downloaded from Maven Central
    sha1 = genuine.read_text().split()[0] if genuine.exists() else digest(jar, "sha1")
    assert sha1 == digest(jar, "sha1"), f"{genuine} does not match {jar}"
    write_text(dest.with_name(jar.name + ".sha1"), sha1)
    sha256 = digest(jar, "sha256")
    write_text(dest.with_name(jar.name + ".sha256"), sha256)
    item = {"group": g, "artifact": a, "version": v}
    # the largest jar is pinned in the inventory (the stronger form); the others are verified against
    # the checksum files the repository publishes (spark_connector_repository_checksum_algorithm)
    if a == "kafka-clients":
        item["checksum"] = f"sha256:{sha256}"
    artifacts.append(item)

write_text(A / "maven-artifacts.yml", "---\n# generated by molecule/_shared/http-artifacts.py\n" + "".join(
    "- " + "\n  ".join(f"{k}: \"{val}\"" for k, val in item.items()) + "\n" for item in artifacts))
print(f"http artifacts ready in {HTTP} ({len(artifacts)} connector jars)")
