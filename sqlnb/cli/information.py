"""``sqlnb mi``: mutual information of every discrete feature with the label, from one
aggregation scan of DATA (the training statistics; no model is saved)."""

from __future__ import annotations

import click

from sqlnb import api
from sqlnb.cli.app import Settings
from sqlnb.cli.io import dump_json
from sqlnb.cli.options import (bins_option, data_spec, feature_options, feature_plan_args, format_option, label_option,
                               parse_bins, source_options, text_args, text_options)
from sqlnb.io.locations import data_source


@click.command("mi")
@click.argument("data")
@label_option("The class column (NULL labels are skipped).")
@feature_options
@bins_option
@text_options
@source_options
@format_option
@click.pass_obj
def mi(settings: Settings, data, label, kind, feature_kind, features, exclude, weight, binarize, bins,
       token_pattern, no_lowercase, stop_words, min_df, max_df, max_features, select_k, reading, fmt):
    """Rank the features of DATA by mutual information I(X;Y) with --label, in nats.

    Features are planned as by `sqlnb fit` (same kind, bins, binarize and text options;
    no column is screened out): categorical, binned and bernoulli columns get one
    value each, computed over the rows where that column is not NULL; a token bag gets
    one per term (the term's presence). Gaussian and count columns have none (listed on
    stderr): bin them with --bins mdl. All of it comes from the per-(class, value)
    counts of one aggregation scan; --select-k K shows the K best.

    \b
    Example:
      sqlnb mi mushroom.csv --label class --format json
      sqlnb mi adult.csv --null-string '?' --label income --bins mdl
      sqlnb mi sms.parquet --label spam --feature-kind text=bernoulli --select-k 20
    """
    params = feature_plan_args(kind, feature_kind, features, exclude, weight, binarize)
    params |= {"text": text_args(token_pattern, no_lowercase, stop_words, min_df, max_df, max_features, None),
               "bins": parse_bins(bins), "screen": False}
    spec = data_spec(settings, data, reading)
    if settings.remote:
        m = api.fit(spec, label, con=settings.warehouse(), **params)
    else:
        with settings.working(), settings.connect() as con:
            m = api.fit(data_source(con, spec, keep_text=(label,)), label, con=con, **params)
    table = m.mutual_information()
    rows = table.to_pylist()[:select_k] if select_k else table.to_pylist()
    skipped = [s for s in table.schema.metadata[b"skipped"].decode().split(",") if s]
    if fmt == "json":
        click.echo(dump_json({"label": label, "rows": m.stats.n_rows, "features": rows, "no_mi": skipped}))
    else:
        width = max([len(_name(r)) for r in rows] + [7])
        click.echo(f"{'feature':<{width}}  {'kind':<11}  mi (nats)")
        for r in rows:
            click.echo(f"{_name(r):<{width}}  {r['kind']:<11}  {r['mi']:.6f}")
    if skipped:
        click.echo(f"no mutual information for {', '.join(skipped)} (gaussian or count columns; "
                   "discretise them with --bins mdl)", err=True)


def _name(row: dict) -> str:
    return row["feature"] if row["term"] is None else f"{row['feature']}:{row['term']}"
