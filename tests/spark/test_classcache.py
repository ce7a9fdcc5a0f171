"""The driver JVM's class archive: built for real (by `make install`, or here when it has not been),
mapped by the next Spark, harmless when damaged."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from headwater.spark import classcache

# a Spark session made by headwater, its JVM logging where each class came from
SESSION = textwrap.dedent("""
    import sys
    from headwater.pipeline_config import parse_config
    from headwater.spark.pipeline import spark_session
    work, log = sys.argv[1], sys.argv[2]
    cfg = parse_config({"name": "t", "source": {"connector.class": "postgres", "topic.prefix": "t",
                        "database.hostname": "h", "database.user": "u", "database.dbname": "d"},
                        "sink": {"type": "jsonl", "path": work + "/sink"},
                        "spark": {"master": "local[1]", "checkpoint": work + "/ck",
                                  "conf": {"spark.driver.extraJavaOptions": "-Xlog:class+load=info:file=" + log}}})
    spark = spark_session(cfg)
    print(spark.range(5).count())
    spark.stop()
""")


def run_session(tmp_path: Path, name: str) -> str:
    log = tmp_path / f"{name}.log"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    env.pop("PYSPARK_GATEWAY_SECRET", None)
    out = subprocess.run([sys.executable, "-c", SESSION, str(tmp_path / name), str(log)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "5"
    return log.read_text()


def spark_context_source(log: str) -> str:
    line = next(x for x in log.splitlines() if "org.apache.spark.SparkContext " in x)
    return line.split(" source: ", 1)[1]


def built_by_this_code(archive: Path) -> bool:
    """Whether `archive` exists and is newer than the code that builds archives."""
    from headwater.spark import warmup

    code = [Path(classcache.__file__), Path(str(warmup.__file__))]
    return archive.is_file() and archive.stat().st_mtime > max(p.stat().st_mtime for p in code)


@pytest.mark.slow
def test_archive_is_built_mapped_and_a_damaged_one_is_ignored(tmp_path, monkeypatch):
    installed = classcache.archive_path()  # the one `make install` built, if it did
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = classcache.archive_path()
    assert path is not None and path.parent == tmp_path / "cache" / "headwater"
    assert classcache.java_options() == ""

    # a damaged archive: the JVM starts without it, silently
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not an archive")
    assert classcache.java_options() == f"-XX:SharedArchiveFile={path} -Xshare:auto {classcache.MAPPING_OPTIONS}"
    log = run_session(tmp_path, "damaged")
    assert "shared objects file (top)" not in spark_context_source(log)

    path.unlink()
    if installed is not None and built_by_this_code(installed):
        # `make install` made it with this very `build()` (~1 min): the same file serves here
        assert not list(installed.parent.glob(installed.name + ".*.tmp"))  # and left no temporary file
        os.symlink(installed, path)
    else:
        assert classcache.build(path)
        assert not list(path.parent.glob("*.tmp"))
    assert path.stat().st_size > 10_000_000
    log = run_session(tmp_path, "mapped")
    # Spark's classes now come from the archive headwater built, not from the jars
    assert spark_context_source(log) == "shared objects file (top)"
    shared = sum(1 for x in log.splitlines() if "org.apache.spark." in x and "shared objects file" in x)
    assert shared > 1000


def test_an_unwritable_cache_does_not_stop_spark(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert classcache.java_options() == ""
    classcache.build_in_background()  # nothing to build into, and no error


def test_this_java_maps_an_archive_where_it_was_dumped():
    """The mapping options are Java's own: with them the JVM maps its base archive at the address it was
    dumped for instead of relocating it (no Spark: `java -version` with class-data-sharing logs)."""
    out = subprocess.run(["java", *classcache.MAPPING_OPTIONS.split(), "-Xshare:auto", "-Xlog:cds=info", "-version"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    log = out.stdout + out.stderr
    assert "Mapped static  region #0" in log
    assert "alternative address" not in log


def test_a_pyspark_installed_again_gets_a_new_archive(tmp_path, monkeypatch):
    """Installed again, pyspark's jars are newer than an archive made before: the JVM refuses that
    archive (silently), so the name changes and a new one is built."""
    import os

    import pyspark

    fake = tmp_path / "pyspark"
    (fake / "jars").mkdir(parents=True)
    monkeypatch.setattr(pyspark, "__file__", str(fake / "__init__.py"))
    before = classcache.archive_path()
    if before is None:
        pytest.skip("no java")
    assert classcache.archive_path() == before
    os.utime(fake / "jars", ns=(1, 1))
    assert classcache.archive_path() != before
