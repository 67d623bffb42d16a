"""SQL construction and rendering: the only place sqlnb touches SQL text.

* :mod:`sqlnb.sql.build` builds trees: quoted identifiers, DOUBLE literals, typed values;
* :mod:`sqlnb.sql.dialects` renders them: :func:`render` is the single function that turns
  a tree into text for a dialect, rewriting what a dialect lacks.

``from sqlnb import sql`` then ``sql.col(...)``, ``sql.render(...)``: the package is used as
one namespace.
"""

from sqlnb.sql.build import (BOUND, EXP_UNDERFLOW, add, as_double, bound_list, col, dbl, finite, greatest, ident,
                             is_nan, long_select, map_lookup, missing, nan_as, nan_as_null, nonfinite, packed_list,
                             paren, read_as, table, trees_collected_by_refcount, union_all, value)
from sqlnb.sql.dialects import DIALECTS, NO_GROUPING_SETS, NO_VAR_POP, render, render_bound

__all__ = ["BOUND", "EXP_UNDERFLOW", "add", "as_double", "bound_list", "col", "dbl", "finite", "greatest", "ident",
           "is_nan", "long_select", "map_lookup", "missing", "nan_as", "nan_as_null", "nonfinite", "packed_list",
           "paren", "read_as", "table", "trees_collected_by_refcount", "union_all", "value", "DIALECTS",
           "NO_GROUPING_SETS", "NO_VAR_POP", "render", "render_bound"]
