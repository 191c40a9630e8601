"""What-if: deletion propagation over a run's row lineage (docs/queries.md "What-if", Lipstick §4.2).

``provplug whatif STORE --delete T --where P`` (and ``--value-id N``): which
rows of every downstream table vanish, which cells change (old -> new,
recomputed for count, sum, avg, min, max and count-distinct over the stored
member values; "changed, value unknown" otherwise) and how many rows are
untouched, if the chosen rows had not been there. Nothing is re-run and the
store is only read.

Modules: :mod:`.select` (which rows are deleted), :mod:`.lineage` (reading
the row-lineage records an op needs), :mod:`.values` (stored values and the
aggregates), :mod:`.engine` (the propagation), :mod:`.answer` (the answer:
text and JSON), :mod:`.cli` (the command). This package's ``__init__`` stays
empty of imports so that ``provplug.cli.main`` loads no heavy library.
"""
