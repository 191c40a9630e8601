"""Lineage queries: RQ, CCProv, CSProv and auto (docs/queries.md, "Indexing and lineage
queries").

Python::

    answer = provplug.open("store.prov").lineage(table="AvgAge", column="Age", where="City = 'NY'")
    answer = provplug.open("store.prov").lineage(value_id=23, method="csprov", direction="up")
    answer.to_dict()          # exactly what `provplug lineage ... --json` prints

Command line::

    provplug lineage STORE TABLE.COLUMN --where "SQL predicate on TABLE's rows"
    provplug lineage STORE --value-id N [--value-id M ...]
        [--direction up|down] [--method auto|csprov|ccprov|rq|PLUGIN] [--tau TRIPLES] [--run RUN]
        [--depth N] [--sources-only] [--summary] [--format text|json|svg|html] [--json] [-o FILE]

The answer (``--json``; ``LineageAnswer.to_dict()``; back with
``LineageAnswer.from_dict``)::

    {
      "format": "provplug-lineage", "version": 2,
      "method":  "csprov",               # the method asked for
      "direction": "up",                 # up = ancestors, down = descendants
      "stats":   {"sets_read": 3,        # connected sets whose triples were read (0 for rq)
                  "triples_scanned": 7,  # triples the recursion ran over
                  "seconds": 0.004,      # wall time of the whole query
                  "path": "driver"}      # driver (pyarrow + NumPy, no JVM) or spark
      "query":   [CELL, ...],            # the queried value(s)
      "lineage": [CELL, ...],            # every ancestor (or descendant), by value id;
                                         # queried values are never repeated here
      "edges":   [{"src": 15, "dst": 23, "op": "R2"}, ...],
                                         # every triple among query + lineage values,
                                         # op by its name, sorted by (dst, src)
      "rows":    {"2:0": {"Name": "Steve", "City": "NY", "Age": 30}, ...}
                                         # each stored row once, by "TABLE_ID:ROW"
    }

    CELL = {"value_id": 15, "table": "Person2", "column": "Age",
            "value": 30,                 # null if rows not stored
            "row": "2:0"}                # key into rows; null if rows not stored

``--depth N``, ``--sources-only`` and ``--summary`` narrow or count the
answer (``LineageAnswer.within_depth``, ``sources_only``, ``summary``);
``--format svg|html`` draws it (:mod:`provplug.query.picture`).

Imported values take table and column from the import's value mapping (table
``unknown`` when unlisted) and have ``row``/``value`` null. Dates, times and
decimals in rows are given as text. JSON has no NaN or infinity: a NaN, inf
or -inf cell is null in ``row`` and ``value`` (the tree output shows ``nan``,
``inf``), so the output is valid JSON for every parser.

Errors: one line on stderr, exit code 2. With ``--json`` that line is a JSON
object, ``{"error": MESSAGE, "type": KIND}`` (KIND: the exception's class,
e.g. ``LineageQueryError``, ``DamagedIndexError``, ``UsageError``), and
stdout stays empty.
"""

from __future__ import annotations
