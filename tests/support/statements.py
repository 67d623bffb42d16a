"""What a fit reads (the fit-at-the-floor tests): Parquet files written by a DuckDB
SELECT, the statements :class:`sqlnb.engines.DuckDBEngine` runs on one of them, and a view
that counts the rows every scan of it reads."""

from __future__ import annotations

from sqlnb import sql
from sqlnb.engines import DuckDBEngine


def write_parquet(con, path, select: str) -> str:
    """The rows of ``select`` (DuckDB SQL) written by ``con`` to the Parquet file ``path``."""
    con.execute(f"COPY ({select}) TO '{path}' (FORMAT parquet)")
    return str(path)


def reads(monkeypatch, path) -> list[str]:
    """Statements reading ``path`` that ``DuckDBEngine`` runs (execute and relation)."""
    seen: list[str] = []
    execute, relation = DuckDBEngine.execute, DuckDBEngine.relation

    def counted(fn):
        def run(self, tree, *args, **kwargs):
            text = sql.render(tree, "duckdb")
            if path in text:
                seen.append(text)
            return fn(self, tree, *args, **kwargs)
        return run

    monkeypatch.setattr(DuckDBEngine, "execute", counted(execute))
    monkeypatch.setattr(DuckDBEngine, "relation", counted(relation))
    return seen


def executed(monkeypatch) -> list[str]:
    """Every statement :meth:`DuckDBEngine.execute` runs, rendered for DuckDB."""
    seen: list[str] = []
    execute = DuckDBEngine.execute

    def run(self, tree, *args, **kwargs):
        seen.append(sql.render(tree, "duckdb"))
        return execute(self, tree, *args, **kwargs)

    monkeypatch.setattr(DuckDBEngine, "execute", run)
    return seen


def counting_view(con, raw, columns: list[str], counted: str) -> dict:
    """Register ``raw`` (an Arrow table) and a view ``data`` of its ``columns`` in that
    order, ``counted`` passed through a side-effecting UDF ``tick``: every scan of the view
    adds its rows to the returned ``{"rows": n}``."""
    try:
        from duckdb import sqltypes as T
    except ImportError:  # pragma: no cover - older DuckDB
        from duckdb import typing as T
    seen = {"rows": 0}

    def tick(x):
        seen["rows"] += len(x)
        return x

    con.create_function("tick", tick, [T.DOUBLE], T.DOUBLE, type="arrow", side_effects=True)
    con.register("raw", raw)
    select = ", ".join(f"tick({c}) AS {c}" if c == counted else c for c in columns)
    con.execute(f"CREATE VIEW data AS SELECT {select} FROM raw")
    return seen
