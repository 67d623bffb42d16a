"""Spark SQL through a pyspark ``SparkSession`` (local mode or a cluster)."""

from __future__ import annotations

import uuid

from sqlnb import sql
from sqlnb.engines.base import ColumnsFromResolve, duckdb_type, probe, source_node
from sqlnb.errors import SqlnbError, SqlnbNotFound
from sqlnb.source import Files, Source, Table, file_format, guess


class SparkEngine(ColumnsFromResolve):
    """Spark SQL through a pyspark ``SparkSession`` (local mode or a cluster).

    Training runs two aggregation queries in Spark and collects only their results
    (a few rows per class); scoring returns a lazy ``DataFrame``. Data can be a table or
    view name, a Spark SQL query, Parquet, CSV or JSON-lines files (path, glob or
    directory, read by ``spark.read``), a Spark ``DataFrame`` or a pyarrow table (files,
    DataFrames and tables are registered as temporary views). Storage: see :mod:`sqlnb.store.spark`.
    """

    dialect = "spark"

    def __init__(self, session):
        self.spark = session

    def execute(self, tree, params=None):
        df = self.spark.sql(sql.render(tree, self.dialect), args=list(params) if params is not None else None)
        return [tuple(r) for r in df.collect()]

    def relation(self, tree):
        """The query as a lazy Spark ``DataFrame``."""
        return self.spark.sql(sql.render(tree, self.dialect))

    def resolve(self, data) -> Source:
        data = guess(data)
        if isinstance(data, Source):
            return data
        described = "the DataFrame"
        if isinstance(data, Files):
            data, described = self._read_files(data), f"files {data.path!r}"
        if type(data).__module__.startswith(("pyarrow", "pandas")):
            data = self.spark.createDataFrame(data)
        if type(data).__module__.startswith("pyspark"):  # a DataFrame
            view = f"sqlnb_input_{uuid.uuid4().hex[:12]}"
            data.createOrReplaceTempView(view)
            data = Table(view)
            found = (sql.table(view), described)
        else:
            found = source_node(data, self.dialect)
        if found is None:
            raise SqlnbError(f"Spark reads tables, views, queries, files and DataFrames, not a "
                             f"{type(data).__name__}")
        node, desc = found
        try:
            schema = self.spark.sql(sql.render(probe(node), self.dialect)).schema  # analysed, not run
        except Exception as e:  # pyspark's AnalysisException and friends
            text = str(e).splitlines()[0]
            if "TABLE_OR_VIEW_NOT_FOUND" in text:
                raise SqlnbNotFound(f"{desc} not found in the Spark catalog") from None
            raise SqlnbError(f"cannot read {desc}: {text}") from None
        columns = {f.name: duckdb_type(f.dataType.simpleString(), self.dialect) for f in schema.fields}
        return Source(expr=node, columns=columns, description=desc)

    #: DuckDB reader options (what the CLI's CSV options set) and their Spark names.
    _CSV_OPTIONS = {"delim": "sep", "sep": "sep", "header": "header", "nullstr": "nullValue"}

    def _read_files(self, files: Files):
        """Parquet, CSV or JSON-lines files (path, glob or Parquet directory) read by Spark
        itself, so they never pass through the driver. CSV has a header row by default and
        its column types are inferred, as DuckDB does."""
        fmt = files.format or file_format(files.path)
        reader = self.spark.read
        if fmt == "csv":
            opts = {"header": True, "inferSchema": True}
            for key, value in files.options.items():
                if key not in self._CSV_OPTIONS:
                    raise SqlnbError(f"Spark's CSV reader has no option {key!r} here; "
                                     f"use one of: {', '.join(sorted(self._CSV_OPTIONS))}")
                if key == "nullstr" and isinstance(value, (list, tuple)):
                    if len(value) != 1:
                        raise SqlnbError("Spark's CSV reader takes one NULL string, not several")
                    value = value[0]
                opts[self._CSV_OPTIONS[key]] = value
            reader = reader.options(**opts)
        elif files.options:
            raise SqlnbError(f"reader options are for CSV files; {files.path!r} is {fmt}")
        try:
            return {"parquet": reader.parquet, "csv": reader.csv, "json": reader.json}[fmt](files.path)
        except Exception as e:  # pyspark's AnalysisException: PATH_NOT_FOUND and friends
            text = str(e).splitlines()[0]
            if "PATH_NOT_FOUND" in text or "Path does not exist" in text:
                raise SqlnbNotFound(f"no file matches {files.path!r}; check the path or glob") from None
            raise SqlnbError(f"Spark cannot read {files.path!r}: {text}") from None
