"""A dbt package's DuckDB scoring macro rendered by Jinja as dbt renders it, for the tests
that compare it with ``sqlnb score`` without starting dbt (test_dbt.py, test_skdb.py)."""

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
