"""Class data sharing (AppCDS) for the Spark driver's JVM: a restart maps the classes the last
run loaded from an archive, instead of finding, parsing and verifying them again.

Every run writes the list of classes the driver's JVM loads (``-XX:DumpLoadedClassList``, a text
file; it costs nothing measurable). A run that started without a usable archive (none yet, or one
the JVM refused: another Java or Spark, another class path) builds one from that list once the
flows have run for :data:`DUMP_DELAY_SECONDS`: ``java -Xshare:dump`` in a process of its own at
the lowest CPU priority, with the running JVM's own class path, into a temporary file renamed
into place when complete. The next start maps it (``-XX:SharedArchiveFile``, ``-Xshare:auto``:
a JVM that cannot use it runs without it, and that run builds a new one). Everything lives in
``mirror.class.data.dir`` (default ``<state-dir>/class-data``), which mirrors of one host may
share (each writes a class list of its own; archives are replaced atomically);
``mirror.class.data.sharing = false`` turns it off.

Measured on a 2-core machine (docs/benchmarks.md): the session starts in about 8 s instead of
14, and a 1M-record mirror's first record arrives 4.7 s sooner.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafka_mirror.engine.driver_launch import DriverLaunch

log = logging.getLogger(__name__)

# in the state directory
CLASS_DATA_DIR = "class-data"
ARCHIVE = "spark-driver.jsa"
# one list per mirror process: <pid>.classlist
CLASS_LIST_SUFFIX = ".classlist"
# what the archive was built for: the JVM and class path it must match
ARCHIVE_INFO = "spark-driver.json"
DUMP_LOG_SUFFIX = ".dump.log"
# the driver's launch commands (kafka_mirror.engine.driver_launch)
LAUNCH_DIR = "driver-launch"
# the flows' first batches load most of what a long run needs
DUMP_DELAY_SECONDS = 60.0
DUMP_TIMEOUT_SECONDS = 900.0
# Spark's default JVM options for the driver: prepended to spark.driver.extraJavaOptions
JAVA_OPTIONS_KEY = "spark.driver.defaultJavaOptions"
# a class list's lines that make the archive generate method handle species (archived_classes)
_GENERATED_SPECIES = "@lambda-form-invoker [SPECIES_RESOLVE]"
_USER_CDS_FLAGS = ("-Xshare", "-XX:SharedArchiveFile", "-XX:DumpLoadedClassList",
                   "-XX:ArchiveClassesAtExit", "-XX:SharedClassListFile")


class ClassData:
    """The driver JVM's class data of one state directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.archive = directory / ARCHIVE
        self.class_list = directory / f"{os.getpid()}{CLASS_LIST_SUFFIX}"
        self._stop = threading.Event()
        self._dump: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        # set by spark_conf: this run writes the class list (the user's options did not choose)
        self.active = False
        self.used_archive = False

    def spark_conf(self, conf: Mapping[str, str]) -> dict[str, str]:
        """``conf`` with the driver's options for class data sharing, unless the user's own
        options already choose (any ``-Xshare``/archive flag in the driver's Java options)."""
        out = dict(conf)
        mine = [f"-XX:DumpLoadedClassList={self.class_list}"]
        if self.archive.is_file():
            mine[:0] = [f"-XX:SharedArchiveFile={self.archive}", "-Xshare:auto"]
        user = " ".join(out.get(k, "") for k in (JAVA_OPTIONS_KEY,
                                                  "spark.driver.extraJavaOptions"))
        if any(flag in user for flag in _USER_CDS_FLAGS):
            return out
        self.active = True
        self.directory.mkdir(parents=True, exist_ok=True)
        _remove_stale_lists(self.directory)
        self.used_archive = self.archive.is_file()
        out[JAVA_OPTIONS_KEY] = " ".join(
            [*([out[JAVA_OPTIONS_KEY]] if out.get(JAVA_OPTIONS_KEY) else []),
             *(shlex.quote(o) for o in mine)])
        return out

    def driver_launch(self) -> DriverLaunch:
        """The driver's launch commands, kept beside the archive (the class list, named after
        this process, is the part that changes at every start)."""
        return DriverLaunch(self.directory / LAUNCH_DIR, volatile=[str(self.class_list)])

    def started(self, spark: Any) -> None:
        """After the session started: build an archive later in this run when this JVM has none
        it could use."""
        if not self.active:
            return  # the user's own options chose (spark_conf left them alone)
        jvm = RunningJvm.of(spark)
        if self.used_archive and jvm.sharing and self.matches(jvm):
            log.info("Spark driver JVM: classes mapped from %s", self.archive)
            return
        if self.used_archive:
            log.info("Spark driver JVM: %s does not match this JVM or class path; a new one is "
                     "built in %.0f s", self.archive, DUMP_DELAY_SECONDS)
        self._thread = threading.Thread(target=self._dump_later, args=(jvm,), daemon=True,
                                        name="class-data-dump")
        self._thread.start()

    def matches(self, jvm: RunningJvm) -> bool:
        """Whether the archive there was built for this JVM and class path."""
        try:
            info = json.loads((self.directory / ARCHIVE_INFO).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return bool(info == jvm.info())

    def _dump_later(self, jvm: RunningJvm) -> None:
        if self._stop.wait(DUMP_DELAY_SECONDS):
            return
        try:
            self.dump(jvm)
        except Exception as exc:  # the mirror runs on without it
            log.warning("Spark driver JVM: class data archive not built: %s", exc)

    def dump(self, jvm: RunningJvm) -> bool:
        """Build the archive from the classes this run loaded so far (lowest CPU priority);
        True when it is in place."""
        classes = self.class_list.with_suffix(".dump")
        classes.write_text(archived_classes(
            self.class_list.read_text(encoding="utf-8", errors="replace")), encoding="utf-8")
        partial = self.directory / f"{ARCHIVE}.{os.getpid()}.partial"
        partial.unlink(missing_ok=True)
        argv = [jvm.java, "-Xshare:dump", f"-XX:SharedClassListFile={classes}",
                f"-XX:SharedArchiveFile={partial}", "-Xmx512m", "-cp", jvm.class_path]
        with open(self.directory / f"{os.getpid()}{DUMP_LOG_SUFFIX}", "wb") as out:
            self._dump = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT)
            with contextlib.suppress(OSError):  # lowest CPU priority: the mirror comes first
                os.setpriority(os.PRIO_PROCESS, self._dump.pid, 19)
            try:
                code = self._dump.wait(DUMP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self._dump.kill()
                self._dump.wait()
                code = -1
            self._dump = None
        classes.unlink(missing_ok=True)
        if code != 0 or not partial.is_file() or self._stop.is_set():
            partial.unlink(missing_ok=True)
            if not self._stop.is_set():
                log.warning("Spark driver JVM: building the class data archive failed (exit %s, "
                            "see %s)", code, out.name)
            return False
        info = self.directory / f"{ARCHIVE_INFO}.{os.getpid()}.partial"
        info.write_text(json.dumps(jvm.info(), sort_keys=True), encoding="utf-8")
        os.replace(partial, self.archive)
        os.replace(info, self.directory / ARCHIVE_INFO)
        log.info("Spark driver JVM: class data archive built (%s, %.0f MB); the next start maps "
                 "it", self.archive, self.archive.stat().st_size / 1e6)
        return True

    def stop(self) -> None:
        """Stop a dump in progress (its partial file is removed); this run's class list goes."""
        self._stop.set()
        dump = self._dump
        if dump is not None and dump.poll() is None:
            dump.kill()
        if self._thread is not None:
            self._thread.join(30)
        if self.active:
            self.class_list.unlink(missing_ok=True)


def archived_classes(class_list: str) -> str:
    """What the archive is built from: the JVM's class list up to its last complete line (it is
    written as the JVM loads classes), without the method handle species the JVM generated
    (``@lambda-form-invoker [SPECIES_RESOLVE]``). Archived, a species has no class file behind
    it, and a JVM that hands every class it loads to a class file hook (JFR started with the JVM,
    a Java agent that transforms classes, as tracing agents do) crashed loading one (Java 17:
    SIGSEGV in ``KlassFactory::check_shared_class_file_load_hook``); without them it starts as
    any other, and generates the few species it needs when it needs them."""
    complete = class_list[: class_list.rfind("\n") + 1]
    return "".join(line for line in complete.splitlines(keepends=True)
                   if not line.startswith(_GENERATED_SPECIES))


def _remove_stale_lists(directory: Path) -> None:
    """Class lists, logs and partial files of mirror processes that are gone."""
    for path in directory.iterdir():
        pid = path.name.split(".", 1)[0]
        if path.name.startswith(ARCHIVE):
            pid = path.name[len(ARCHIVE) + 1:].split(".", 1)[0]
        elif path.name.startswith(ARCHIVE_INFO):
            pid = path.name[len(ARCHIVE_INFO) + 1:].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            path.unlink(missing_ok=True)


class RunningJvm:
    """What the archive must match, read from the driver's running JVM."""

    def __init__(self, java: str, class_path: str, version: str, sharing: bool) -> None:
        self.java = java
        self.class_path = class_path
        self.version = version
        self.sharing = sharing

    @classmethod
    def of(cls, spark: Any) -> RunningJvm:
        system = spark._jvm.java.lang.System
        home = str(system.getProperty("java.home"))
        return cls(
            java=str(Path(home) / "bin" / "java"),
            class_path=str(system.getProperty("java.class.path")),
            version=str(system.getProperty("java.vm.version")),
            # "mixed mode, sharing" while classes come from an archive
            sharing="sharing" in str(system.getProperty("java.vm.info")),
        )

    def info(self) -> dict[str, str]:
        return {"java": self.java, "version": self.version, "class_path": self.class_path}
