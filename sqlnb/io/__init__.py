"""Where data comes from and where results go, as the command line names them.

* :mod:`~sqlnb.io.locations` — ``db.duckdb:table``, files, ``-``: parsed and resolved;
* :mod:`~sqlnb.io.output` — scored rows written to Parquet/CSV files, DuckDB tables or
  standard output, atomically (write, then rename or commit).
"""
