"""Running dbt as a user runs it, for the tests of the packages ``sqlnb dbt`` writes:
the ``dbt`` executable beside this Python (skipped, or failed in CI, without dbt-duckdb
and dbt-postgres), one process per command, and the status of each node of its last run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.engines import unavailable


def dbt_executable() -> str:
    exe = Path(sys.executable).with_name("dbt")
    try:
        import dbt.adapters.duckdb  # noqa: F401
        import dbt.adapters.postgres  # noqa: F401
    except ImportError as e:
        unavailable("dbt (pip install 'sqlnb[dbt]')", e)
    if not exe.exists():
        unavailable("dbt", FileNotFoundError(exe))
    return str(exe)


def run(args, cwd, what: str, ok: bool = True, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run dbt ``args`` in ``cwd``; fail the test with dbt's output when it fails and ``ok``;
    killed after ``timeout`` seconds."""
    env = dict(os.environ, DBT_SEND_ANONYMOUS_USAGE_STATS="false", DO_NOT_TRACK="1", DBT_USE_COLORS="false",
               DBT_PARTIAL_PARSE="true")
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout)
    if ok and proc.returncode != 0:
        pytest.fail(f"{what} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    return proc


def results(project: Path) -> dict[str, str]:
    """Status of each node of dbt's last run, by its name."""
    runs = json.loads((project / "target" / "run_results.json").read_text())["results"]
    return {r["unique_id"].split(".")[-2 if r["unique_id"].startswith("test.") else -1]: r["status"] for r in runs}


def postgres_profiles(directory: Path, profile: str, dsn: str) -> Path:
    """``directory/profiles.yml``: the profile ``profile`` with one dbt-postgres target on
    the server of ``dsn`` (schema ``public``, one thread); returns ``directory``."""
    parts = dict(part.split("=", 1) for part in dsn.split())
    directory.mkdir(exist_ok=True)
    (directory / "profiles.yml").write_text(json.dumps({profile: {"target": "pg", "outputs": {"pg": {
        "type": "postgres", "host": parts["host"], "port": int(parts["port"]), "user": parts["user"], "password": "",
        "dbname": parts["dbname"], "schema": "public", "threads": 1}}}}))
    return directory


def train_project(wh: Path, out: Path, first: str, others: dict, args: list, table: str = "customers") -> None:
    """``sqlnb dbt --project --train`` of model ``first`` of the warehouse ``wh`` into ``out``
    (scoring ``table``), the package ``--train`` of each model of ``others`` (name -> its
    extra arguments) in its ``dbt_packages``, and per model ``<name>_trained``, a table
    of ``table``'s ``id`` and scores by the package's trained macro; ``args``: the first's
    extra arguments."""
    from support.cli import invoke

    made = invoke("dbt", "--model", f"{wh}:{first}", "--out", out, "--project", "--table", table, "--train", *args)
    assert made.exit_code == 0, made.stderr
    for name, extra in others.items():
        made = invoke("dbt", "--model", f"{wh}:{name}", "--out", out / "dbt_packages" / f"sqlnb_{name}", "--train",
                      *extra)
        assert made.exit_code == 0, made.stderr
    for name in [first, *others]:
        (out / "models" / f"{name}_trained.sql").write_text(
            "{{ config(materialized='table') }}\n"
            f"{{{{ sqlnb_{name}.score_{name}_trained(source('sqlnb_{first}', 'input'), columns=['id']) }}}}\n")


def postgres_trained(dsn: str, name: str, classes: list, scored: Path) -> tuple[list, list]:
    """Rows ``(id, proba_<class>…, prediction)`` of ``public.<name>_trained`` on the server of
    ``dsn``, and of ``customers`` scored there by the model ``sqlnb dbt-import`` reads from
    the tables dbt-postgres built (``<name>_dbt``, written to ``scored`` as Parquet)."""
    import duckdb
    import psycopg

    from support.cli import invoke

    cols = ", ".join(["id", *("proba_" + k for k in classes), "prediction"])
    with psycopg.connect(dsn) as c:
        trained = c.execute(f"SELECT {cols} FROM public.{name}_trained").fetchall()
    done = invoke("--engine", "postgres", "--dsn", dsn, "dbt-import", "--model", name, "--as", f"{name}_dbt",
                  "--replace")
    assert done.exit_code == 0, done.stderr
    done = invoke("--engine", "postgres", "--dsn", dsn, "score", "customers", "--model", f"{name}_dbt", "--key", "id",
                  "--keep", "id", "--out", scored, "--replace")
    assert done.exit_code == 0, done.stderr
    return trained, duckdb.sql(f"SELECT {cols} FROM read_parquet('{scored}')").fetchall()


def postgres_build(dbt: str, project: Path, directory: Path, profile: str, dsn: str, dbt_vars: str):
    """A copy of ``project`` in ``directory`` with a profile on the server of ``dsn``, and
    a function that runs ``dbt build`` there (with the extra arguments it is given) and
    asserts every node succeeded or passed. With ``ok=False`` it returns dbt's process
    whatever it did (``command`` another dbt command, e.g. ``"run"``); ``build.project`` is
    the copy, whose ``target/run_results.json`` :func:`results` reads."""
    import shutil

    profiles = postgres_profiles(directory / "profiles", profile, dsn)
    copy = directory / "pg_project"
    shutil.copytree(project, copy, ignore=shutil.ignore_patterns("target", "logs"))

    def build(*extra, ok: bool = True, command: str = "build") -> subprocess.CompletedProcess:
        proc = run([dbt, command, "--profiles-dir", str(profiles), "--vars", dbt_vars, *extra], copy,
                   f"dbt {command} (postgres)", ok=ok)
        if ok:
            assert set(results(copy).values()) == {"success", "pass"}
        return proc

    build.project = copy
    return build
