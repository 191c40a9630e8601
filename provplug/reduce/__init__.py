"""Capture-time provenance reduction (paper 001; docs/capture-semantics.md "Reductions").

A reduction chooses, per source table, the rows whose provenance a run
keeps::

    import provplug
    from provplug import reduce

    with provplug.capture(spark, "store.prov",
                          reduce={"Weather": reduce.sample(0.33, seed=1)}) as run:
        ...

Techniques (parameters named as the thesis names them; every random choice
is a seeded hash of the row's values, made in Spark):

* :func:`sample` ``(ratio, seed)``: simple random sampling;
* :func:`stratified` ``(attribute, ratio, seed)``: ``ratio`` of every stratum;
* :func:`histogram` ``(attribute, width, variant, buckets | ratio, seed)``;
* :func:`kmeans` ``(attributes, k, variant, ratio | clusters, assignment, seed)``;
* :func:`equivalence` ``(attribute, variant, ratio | classes, seed)``;
* :func:`keep` ``(where)``: an explicit selection (a SQL predicate).

``variant="eliminate"`` keeps whole groups (buckets, clusters, classes);
``variant="sample"`` samples ``ratio`` of every group. Plugins add
techniques through ``provplug_register_reductions``; spec strings
(:func:`parse_spec`, ``TABLE=TECHNIQUE:key=value,...``) name any of them.

Modes (``reduce_mode=``), the same default everywhere (the Python API,
``provplug run --reduce``, Kedro's ``provplug: {reduce: ...}``):
``"production"``, the default, runs the pipeline on every row and stores
only the triples on paths from kept source rows (results unchanged);
``"thesis"``, only when named, runs the pipeline on the reduced input as
paper 001 does (its results differ from an unreduced run's), and the
capture says so in a warning on the ``provplug.reduce`` logger (on stderr
when logging is not configured). The run's manifest records the reduction; ``provplug metrics FULL REDUCED``
compares a reduced run with a full one (:mod:`provplug.reduce.metrics`).

Importing this package loads no Spark, pyarrow or NumPy.
"""

from __future__ import annotations

from provplug.plugin.reductions import MODES, VARIANTS, Reduction, ReductionTechnique, describe, describe_run_reduction
from provplug.reduce.spec import parse_reduction, parse_spec, parse_specs, reductions_from
from provplug.reduce.techniques import equivalence, histogram, keep, kmeans, sample, stratified

__all__ = [
    "MODES",
    "VARIANTS",
    "Reduction",
    "ReductionTechnique",
    "describe",
    "describe_run_reduction",
    "equivalence",
    "histogram",
    "keep",
    "kmeans",
    "parse_reduction",
    "parse_spec",
    "parse_specs",
    "reductions_from",
    "sample",
    "stratified",
]
