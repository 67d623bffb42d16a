"""In CI every skip is a failure: the guard itself, tried on tiny test
files in a pytest of their own, and the engine helpers that decide what "not available" is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from xml.etree import ElementTree

import support.ci
from support import engines, postgres, spark
from support.ci import in_ci

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

TINY = '''
import sys
import pytest

def test_passes():
    pass

def test_skips_in_the_body():
    pytest.skip("no server here")

@pytest.mark.skipif(True, reason="marked to skip")
def test_skipif_mark():
    pass

@pytest.fixture
def needs_engine():
    pytest.skip("engine missing")

def test_skips_in_a_fixture(needs_engine):
    pass

def test_imports_or_skips():
    pytest.importorskip("no_such_module_sqlnb_ci")

@pytest.mark.xfail(reason="a known gap", strict=True)
def test_expected_failure():
    assert False
'''

WHOLE_MODULE = '''
import pytest
pytest.skip("the whole module needs something", allow_module_level=True)

def test_never_collected():
    pass
'''


def _run(tmp_path: Path, ci: str | None) -> tuple[dict[str, str], str]:
    """Run the two tiny files with only support.ci as plugin (no conftest): ``({test or
    module: outcome}, output)``, the outcomes read from pytest's JUnit XML report."""
    (tmp_path / "test_tiny.py").write_text(TINY)
    (tmp_path / "test_whole_module.py").write_text(WHOLE_MODULE)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(ROOT), env.get("PYTHONPATH", "")])
    xml = tmp_path / "report.xml"
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "support.ci", "-p", "no:cacheprovider", "-q",
                          "--rootdir", str(tmp_path), "-c", os.devnull, f"--junitxml={xml}", "--continue-on-collection-errors",
                          "test_tiny.py", "test_whole_module.py"],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    outcomes = {}
    for case in ElementTree.parse(xml).getroot().iter("testcase"):
        tags = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        kind = tags[0] if tags else "passed"
        if kind == "skipped" and case.find("skipped").get("type") == "pytest.xfail":
            kind = "xfailed"
        outcomes[case.get("name")] = kind
    return outcomes, run.stdout + run.stderr


def test_in_ci_every_skip_fails(tmp_path):
    got, output = _run(tmp_path, "true")
    assert got == {
        "test_passes": "passed",
        "test_skips_in_the_body": "failure",
        "test_skipif_mark": "error",  # skipped in setup
        "test_skips_in_a_fixture": "error",  # a setup failure
        "test_imports_or_skips": "failure",
        "test_expected_failure": "xfailed",  # an expected failure is data, not a skip
        "test_whole_module": "error",  # a collection error
    }, output
    assert "no server here" in output and "in CI every test must run" in output
    assert "0 skipped" not in output and " skipped" not in output.splitlines()[-1], output


def test_outside_ci_a_skip_is_a_skip(tmp_path):
    for value in (None, "false"):  # "0" and the rest: test_one_definition_of_in_ci
        got, output = _run(tmp_path, value)
        assert got == {
            "test_passes": "passed", "test_skips_in_the_body": "skipped", "test_skipif_mark": "skipped",
            "test_skips_in_a_fixture": "skipped", "test_imports_or_skips": "skipped",
            "test_expected_failure": "xfailed", "test_whole_module": "skipped",
        }, (value, output)


@pytest.mark.parametrize("value,expected", [
    (None, False), ("", False), ("0", False), ("false", False), ("False", False), (" no ", False),
    ("1", True), ("true", True), ("TRUE", True), ("yes", True), ("github", True),
])
def test_one_definition_of_in_ci(monkeypatch, value, expected):
    """``CI=false`` is not CI (support/engines.py used to count any non-empty value)."""
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    assert in_ci() is expected


def test_this_suite_runs_with_the_guard(request):
    """tests/conftest.py registers the two hooks of support.ci (the same functions)."""
    hooks = [getattr(p, "pytest_runtest_makereport", None) for p in request.config.pluginmanager.get_plugins()]
    assert support.ci.pytest_runtest_makereport in hooks
    collect = [getattr(p, "pytest_make_collect_report", None) for p in request.config.pluginmanager.get_plugins()]
    assert support.ci.pytest_make_collect_report in collect


def test_ci_run_sets_ci_before_it_runs_the_tests():
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    sets = [i for i, line in enumerate(script) if line.strip() == "export CI=true"]
    runs = [i for i, line in enumerate(script) if "-m pytest" in line]
    assert sets and runs and sets[0] < runs[0]


# -- what "not available" is -------------------------------------------------------------------


def _raising(exc: BaseException):
    class Failing:
        def __enter__(self):
            raise exc

        def __exit__(self, *a):
            return False

    return lambda **kw: Failing()


@pytest.mark.parametrize("ci", ["", "true"])
def test_missing_postgres_binaries_skip_outside_ci_and_fail_in_it(monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    monkeypatch.setattr(postgres, "postgres_server", _raising(postgres.PostgresNotFound("no initdb")))
    expected = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(expected, match="PostgreSQL is not available: no initdb"):
        engines.start_postgres()


def test_a_postgres_server_that_fails_to_start_is_an_error_not_a_skip(monkeypatch):
    """A failing initdb, or a bug in the helper, is not "not available" (a broad
    ``except Exception`` used to skip it)."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(postgres, "postgres_server", _raising(RuntimeError("initdb failed: ...")))
    with pytest.raises(RuntimeError, match="initdb failed"):
        engines.start_postgres()
    monkeypatch.setattr(postgres, "postgres_server", _raising(TypeError("a bug in the helper")))
    with pytest.raises(TypeError):
        engines.start_postgres()


def test_a_spark_session_that_fails_to_start_is_an_error_not_a_skip(monkeypatch):
    pytest.importorskip("pyspark")
    from pyspark import SparkContext
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)  # as if no session ran yet
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(spark, "spark_session", _raising(RuntimeError("Java gateway process exited")))
    with pytest.raises(RuntimeError, match="Java gateway"):
        with engines.spark_engine({}):
            pass
    monkeypatch.setattr(spark, "spark_session", _raising(spark.SparkNotAvailable("no Java runtime found")))
    with pytest.raises(pytest.skip.Exception, match="Spark is not available: no Java runtime found"):
        with engines.spark_engine({}):
            pass


def test_require_pyspark_skips_only_without_java(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(engines, "_require_java", _raising_call(spark.SparkNotAvailable("no Java runtime found")))
    with pytest.raises(pytest.skip.Exception, match="no Java runtime"):
        engines.require_pyspark()
    monkeypatch.setattr(engines, "_require_java", _raising_call(OSError("a bug")))
    with pytest.raises(OSError):
        engines.require_pyspark()


def _raising_call(exc: BaseException):
    def call():
        raise exc
    return call
