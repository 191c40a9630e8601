"""Lineage queries: RQ, CCProv, CSProv and auto (README, "Indexing and lineage
queries").

Python::

    answer = provplug.open("store.prov").lineage(table="AvgAge", column="Age", where="City = 'NY'")
    answer = provplug.open("store.prov").lineage(value_id=23, method="csprov", direction="up")
    answer.to_dict()          # exactly what `provplug lineage ... --json` prints

Command line::

    provplug lineage STORE TABLE.COLUMN --where "SQL predicate on TABLE's rows"
    provplug lineage STORE --value-id N [--value-id M ...]
        [--direction up|down] [--method auto|csprov|ccprov|rq|PLUGIN] [--tau TRIPLES] [--json]

The answer (``--json``; ``LineageAnswer.to_dict()``)::

    {
      "query":   [VALUE, ...],           # the queried value(s)
      "method":  "csprov",               # the method asked for
      "direction": "up",                 # up = ancestors, down = descendants
      "lineage": [VALUE, ...],           # every ancestor (or descendant), by value id;
                                         # queried values are never repeated here
      "edges":   [{"src": 15, "dst": 23, "op": "R2"}, ...],
                                         # every triple among query + lineage values,
                                         # op by its name, sorted by (dst, src)
      "stats":   {"sets_read": 3,        # connected sets whose triples were read (0 for rq)
                  "triples_scanned": 7,  # triples the recursion ran over
                  "seconds": 0.004,      # wall time of the whole query
                  "path": "driver"}      # driver (pyarrow + NumPy, no JVM) or spark
    }

    VALUE = {"value_id": 15, "table": "Person2", "column": "Age",
             "row": {"Name": "Steve", "City": "NY", "Age": 30},   # null if rows not stored
             "value": 30}                                          # null if rows not stored

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
