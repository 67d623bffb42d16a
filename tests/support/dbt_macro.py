"""A dbt package's DuckDB scoring macro rendered by Jinja as dbt renders it, for the tests
that compare it with ``sqlnb score`` without starting dbt (test_dbt.py, test_skdb.py, test_eskdb.py)."""

from __future__ import annotations

from support.engines import unavailable


def macro_sql(files: dict, name: str, relation: str, columns: list[str]) -> str:
    """``duckdb__score_<name>(relation, columns)`` rendered by Jinja as dbt renders it
    (``adapter.quote`` quotes as dbt-duckdb does)."""
    try:
        import jinja2
    except ImportError as e:
        unavailable("jinja2 (pip install 'sqlnb[dbt]')", e)

    class Adapter:
        @staticmethod
        def quote(c: str) -> str:
            return '"' + c + '"'

    env = jinja2.Environment(extensions=["jinja2.ext.do"])
    env.globals["adapter"] = Adapter()
    text = files[f"macros/score_{name}.sql"] + f"{{{{ duckdb__score_{name}(relation, columns) }}}}"
    return env.from_string(text).render(relation=relation, columns=columns)


def assert_macro_scores_as_score(model, test, tmp_path, name: str) -> None:
    """``model`` saved as ``name`` in a store under ``tmp_path``, loaded from there, the
    rows ``test`` (Arrow, key ``rid``) registered beside it: its dbt package's DuckDB macro
    gives one row per test row, ``score``'s (``rid``, probabilities, prediction) exactly."""
    import duckdb

    import sqlnb
    from sqlnb.workflows import dbt
    path = str(tmp_path / "m.duckdb")
    model.save(path, name)
    store = duckdb.connect(path)
    store.register("fixture_input", test)
    loaded = sqlnb.load(store, name)
    select = macro_sql(dbt.package_files(loaded, name), name, '"fixture_input"', ["rid"])
    got = store.sql(f'SELECT * FROM ({select}) ORDER BY "rid"').fetchall()
    want = sorted(loaded.score("fixture_input", store, outputs=("proba", "prediction"), keep=["rid"]).fetchall())
    assert len(got) == test.num_rows and got == want
