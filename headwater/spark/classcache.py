"""A class-data-sharing archive of the driver JVM's classes: Spark starts ~5 s sooner.

Most of a local Spark session's start-up is the JVM loading, verifying and interpreting Spark's
classes (jstack: ~8 s of CPU on the py4j thread and ~10 s in the JIT compilers before the first
micro-batch). Java 17 can dump the classes a run loaded into an archive
(`-XX:ArchiveClassesAtExit`) and map it at the next start (`-XX:SharedArchiveFile`): on this
2-core machine a session with its first job went from ~15 s to ~9.5 s.

`build()` makes the archive once per Java and pyspark installation: a child process runs the small
streaming query of `headwater.spark.warmup`, shaped like headwater's (a Python streaming source,
the `headwater-jsonl` sink, a checkpoint) in a JVM that writes the archive as it exits, and
`build()` then moves the archive into place. The archive is used only when complete (it is renamed
into place after the JVM has exited), and the JVM checks it against its own class path: an archive
that does not match is ignored (`-Xshare:auto`, silently), so a stale or damaged file costs the
speed-up, never a failure. `spark_session` starts
`build()` in the background, at low priority, when the archive is missing (`make install` builds
it up front).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUILD_LOCK_STALE_S = 600  # a build lock older than this belongs to a builder that died
# the shape of the warm-up query: a new shape is a new archive (the old one lacks the new classes)
WORKLOAD = "files-layout-foreachbatch"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "headwater"


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.realpath(os.path.join(home, "bin", "java"))
    found = shutil.which("java")
    return os.path.realpath(found) if found else None


def archive_path() -> Path | None:
    """Where the archive for this Java and this pyspark lives (None without a java to run)."""
    import pyspark

    java = _java()
    if java is None:
        return None
    # the jars directory's time changes when pyspark is installed again (its jars written anew): the
    # JVM refuses an archive whose class path's jars are newer than it (silently, `-Xshare:auto`), and
    # as the name stayed the same nothing rebuilt it (a main checkout's driver JVM: ~6.5 s of CPU at
    # start instead of ~3.7 s, until the archive was removed by hand)
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    with contextlib.suppress(OSError):
        jars += "@" + str(os.stat(jars).st_mtime_ns)
    ident = "|".join([java, str(os.stat(java).st_mtime_ns), os.path.dirname(pyspark.__file__),
                      pyspark.__version__, WORKLOAD, jars])
    digest = hashlib.sha256(ident.encode()).hexdigest()[:16]
    return cache_dir() / f"spark-{pyspark.__version__}-{digest}.jsa"


# Java 17 as Debian builds it maps an archive at a random address (ArchiveRelocationMode=1, for ASLR) and
# then rewrites every pointer in it: the whole archive (~155 MB) became the JVM's private memory at
# start (`java -version` with it: 158 MB resident, against 35 MB mapped where it was dumped) and cost
# ~0.1 s of CPU. Mapped at the address it was dumped for (0: relocated only when that is taken), only
# the pages of the classes a run uses are read in, and those not written stay shared with the page cache.
MAPPING_OPTIONS = "-XX:+UnlockDiagnosticVMOptions -XX:ArchiveRelocationMode=0"


def java_options() -> str:
    """Driver JVM options that map the archive, or "" while there is none."""
    path = archive_path()
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} -Xshare:auto {MAPPING_OPTIONS}"


def build(path: Path) -> bool:
    """Make the archive at `path` (in a child process; True when it is in place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for old in path.parent.glob("*.jsa.*.tmp"):  # left by a builder that was killed
        if time.time() - old.stat().st_mtime > BUILD_LOCK_STALE_S:
            old.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.unlink(tmp)  # the JVM writes it at exit
    try:
        subprocess.run([sys.executable, "-m", "headwater.spark.warmup", tmp], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
        if not os.path.isfile(tmp) or os.path.getsize(tmp) == 0:
            return False
        os.replace(tmp, path)
        return True
    except (subprocess.SubprocessError, OSError):
        return False
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def build_in_background() -> None:
    """Start `build()` in a detached, low-priority process unless one is already running (and not at
    all where the cache directory cannot be written: the archive only makes Spark start sooner)."""
    with contextlib.suppress(OSError):
        _start_builder()


def _start_builder() -> None:
    path = archive_path()
    if path is None or path.is_file():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_suffix(".building")
    try:
        if time.time() - lock.stat().st_mtime < BUILD_LOCK_STALE_S:
            return
        lock.unlink()
    except FileNotFoundError:
        pass
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    # not this process's gateway: the builder starts its own JVM
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY")}
    subprocess.Popen([sys.executable, "-m", "headwater.spark.classcache", "--build", str(path)],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True, env=env, preexec_fn=lambda: os.nice(19))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--build"] and len(argv) == 2:
        target = Path(argv[1])
        try:
            return 0 if build(target) else 1
        finally:
            target.with_suffix(".building").unlink(missing_ok=True)
    path = archive_path()
    if path is None:
        print("headwater: no java found; no class archive built", file=sys.stderr)
        return 1
    if path.is_file():
        print(f"headwater: Spark class archive present: {path}")
        return 0
    ok = build(path)
    print(f"headwater: Spark class archive {'built' if ok else 'could not be built'}: {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
