"""``sqlnb demo``: generate a synthetic data set in DuckDB, then fit, score, evaluate and
describe a model on it, as a first run that needs no data of one's own.
"""

from __future__ import annotations

import time

import click

from sqlnb.cli.app import Settings
from sqlnb.cli.options import replace_option, seed_option
from sqlnb.workflows import demo as demo_module


@click.command()
@click.option("--db", metavar="PATH", help="Database to save the model 'demo' in (default: DIR/demo.duckdb).")
@click.option("--dir", "directory", metavar="DIR", help="Keep the Parquet files here (default: a temporary directory).")
@click.option("--rows", type=click.IntRange(min=20), default=10_000, show_default=True, help="Rows to generate.")
@seed_option("Random seed (same seed, same data).", default=42)
@replace_option
@click.pass_obj
def demo(settings: Settings, db, directory, rows, seed, replace):
    """Generate a synthetic data set in DuckDB, then fit, score, evaluate and show.

    Customers in three segments with numeric, categorical and boolean columns and a few
    NULLs, made with SQL (setseed + random()), split 70/30 into train/test Parquet.

    \b
    Example:
      sqlnb demo
      sqlnb demo --dir demo --rows 100000 --seed 7
    """
    start = time.perf_counter()
    with settings.working():
        text = demo_module.run(settings.connect, directory, db, rows, seed, replace)
    click.echo(text)
    settings.summary(f"demo took {time.perf_counter() - start:.2f} s")
