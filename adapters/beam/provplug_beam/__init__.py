"""provplug's Apache Beam capture adapter (found through the ``provplug`` entry point).

Usage — the same ``@provplug.step`` decorator as for Spark, on functions that
take and return ``PCollection`` s of elements with named attributes (dicts,
``beam.Row``, NamedTuples; a ``(key, value)`` pair has the attributes ``key``
and ``value`` or the value's fields)::

    import apache_beam as beam
    from apache_beam.transforms.combiners import MeanCombineFn
    import provplug

    @provplug.step("R1", output="Person2")
    def adults(people):
        return people | beam.Filter(lambda p: p.Age >= 25)

    @provplug.step("R2", output="AvgAge")
    def average_age(people):
        return people | beam.GroupBy("City").aggregate_field("Age", MeanCombineFn(), "Age")

    with beam.Pipeline() as p, provplug.capture(p, store="people.prov") as run:
        person1 = run.source(rows, "Person1")   # a list, a DataFrame, a PCollection or a read transform
        average_age(adults(person1))

* ``run.source(data, name)`` registers a source table. A list (or DataFrame)
  keeps its order as row numbers; a ``PCollection`` or a read ``PTransform``
  (``beam.io.ReadFromParquet(...)``) is numbered by content, deterministically.
* A step's transforms are grouped under a composite labelled with the step's
  name. Inside it, each transform is replaced by a traced counterpart (see
  :mod:`provplug_beam.rules` for the table of semantics: ``Map``/``FlatMap``/
  ``ParDo`` black box, ``Filter`` copy, ``GroupByKey``/``CombinePerKey``/
  ``CombineGlobally``/``GroupBy(...).aggregate_field`` as groupBy/agg,
  ``CoGroupByKey`` join, ``Flatten`` union, ``Distinct``, ``Select``).
  Composite transforms (``Count.PerElement``, ...) are traced through the
  transforms they expand to, without their type hints (they describe plain
  values); a primitive the adapter does not know raises
  :class:`provplug.CaptureError`. Grouping keys keep the type Beam knows for
  the plain values, so a coder registered for the key type is used.
* Transforms applied *outside* any step to captured data (between a source
  and a step, or between steps) need no decorator. One a rule traces is
  traced, and the step that reads its result takes it into its op (its
  operations, its input tables), so the lineage runs through it. Any other
  (a composite such as ``Count.PerElement``, a sink, ``Map(print)``) sees
  plain values; if a step then reads its result, it is applied once more,
  traced, to the traced inputs (a composite traced through its parts), or
  the step fails with a ``CaptureError`` naming it — never a silent cut.
* A step called again is labelled, and names its tables, ``<name>#2``,
  ``#3``, ... (its ops keep the step's name).
* A user's composite ``PTransform`` applied outside any step is a *module*
  of the steps its ``expand`` calls (Lipstick's ZoomOut/ZoomIn): their ops
  record its label as their ``module`` parameter (nested composites dotted,
  ``Outer.Inner``; inside ``provplug.module(...)`` blocks prefixed), so
  ``provplug lineage ... --zoom-out LABEL`` answers at composite level. The
  steps read the captured data the composite was given, through any plain
  transforms it applies before them (those join the step's op).
* Row lineage (docs/capture-semantics.md, :mod:`provplug.ingest.rowlineage`): every row of a step
  output is recorded with its input rows (one member per merged element for
  combines, ``Distinct`` and ``CoGroupByKey``; one member otherwise), and
  each output table with its rules (copied, aggregated and computed columns,
  deciding columns). ``FlatMap``/``ParDo`` (0..n elements per input, maybe
  stateful), DoFns reading captured side inputs and global combines with
  defaults make existence opaque; see :mod:`provplug_beam.rowstate`.
* Location lineage (docs/capture-semantics.md, :mod:`provplug_beam.rated`): a step declared
  with ``rates={"production": f}`` (consumption 1, no buffer) whose body is
  one ``Map``/``MapTuple``/``FlatMap``/``ParDo`` over one stored table
  numbers its output by position (the ``j``-th element emitted for input row
  ``r`` is row ``r·f + j``), writes no triple and records one location edge
  with the black box's column map; its op still counts the triples the edge
  stands for. An element emitting other than ``f`` elements fails the run
  with a ``LocationError`` (checked in the worker), so does an element
  missing a cell; any other declaration or body is a ``LocationError`` when
  the step is called. ``location_lineage=False`` stores the triples as ever.
* Any ``Pipeline``, ``TestPipeline`` included, can be captured.
* Provenance travels *with the data*: every element is ``(value, provenance)``
  inside the pipeline (the provenance of a black box's output is one id
  tuple for all its attributes, see :mod:`provplug_beam.elements`), and the
  pipeline itself numbers the rows of step outputs and PCollection sources
  and writes their rows and triples through the run's writers; the driver
  only reads back a small per-table summary (counts, columns). A source
  given in memory (a list, a DataFrame) is laid out and stored by the
  driver, and enters the pipeline already traced.
* The capture block runs the pipeline when it ends (DirectRunner unless the
  pipeline says otherwise) and commits the run only if it succeeded;
  ``with beam.Pipeline() as p`` around it then gets that same result instead
  of running twice. Code outside steps sees plain values, so sinks and
  ``Map(print)`` on a step's output work unchanged.
* Lifecycle hooks fire as for Spark. Beam builds lazily, so ``step_finished``
  reports the op when its transforms are built (``op.triples`` is ``None``
  then); the committed op carries the triple count and the run's end time.
* Beam's own ``Lineage`` metrics (sources read, sinks written — provplug
  reports each table the pipeline stores as a sink; sources given in memory
  are stored by the driver and not reported) are kept in ``beam_lineage.json`` in
  the run.

Not captured: side-input cells as parents (side inputs are read as plain
values), multi-output ``ParDo`` (tagged outputs), DoFns asking for
timestamps/windows/state, ``CombinePerKey`` with extra arguments, streaming.
Beam internals used for this live in :mod:`provplug_beam._internals` only.
"""
