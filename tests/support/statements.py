"""What a fit reads (the fit-at-the-floor tests): Parquet files written by a DuckDB
SELECT, and the statements :class:`sqlnb.engines.DuckDBEngine` runs on one of them."""

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
