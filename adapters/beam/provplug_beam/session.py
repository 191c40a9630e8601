"""One Beam capture run: registers tables, rewrites the transforms of steps,
runs the pipeline when the capture block ends and records what it wrote."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import itertools
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import apache_beam as beam
from apache_beam.metrics.metric import Lineage
from apache_beam.typehints import typehints

from provplug.errors import CaptureError
from provplug.ingest.capture import module
from provplug.location import LocationEdge, Rates
from provplug.model import OpInfo, StepInfo, TableInfo
from provplug.plugin.protocols import RunRecorder
from provplug.plugin.writers import Destination

from . import _internals as internals
from . import rated, rowstate
from .rules import Expansion, Rule, rated_rule, rule_for
from .tables import (
    CreateNumbered,
    Materialize,
    NumberByContent,
    TableTarget,
    column_bases,
    layout_in_memory,
    rebase_in_memory,
    summary_name,
    write_in_memory,
)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


@dataclasses.dataclass(frozen=True)
class Trace:
    """What the session knows about a traced PCollection: the tables its
    provenance points into, the step it is private to (None for a table and
    for transforms applied outside any step), the Beam type of its plain
    values, and the operations applied outside any step since the last table
    (they become part of the op of the step that reads it)."""

    tables: frozenset[int]
    step: int | None
    plain_type: internals.PlainType = dataclasses.field(default_factory=lambda: internals.PlainType.known(None))
    operations: tuple[str, ...] = ()
    black_box: bool = False
    rows: rowstate.RowsFn = rowstate.no_input  # its row lineage (see provplug_beam.rowstate)
    table: int | None = None  # the stored table whose elements it holds, as stored


@dataclasses.dataclass
class StepScope:
    token: int
    name: str
    tables: set[int] = dataclasses.field(default_factory=set)
    operations: list[str] = dataclasses.field(default_factory=list)
    black_box: bool = False
    implicit: set[int] = dataclasses.field(default_factory=set)  # ids of outside PCollections read
    rates: Rates | None = None  # declared rates, when stored as a location edge (:mod:`.rated`)
    rated: Any = None  # the output of its one ParDo, numbered by position
    rated_input: int | None = None  # the table that ParDo reads

    def read(self, pcoll: Any, trace: Trace) -> None:
        """The step reads ``pcoll``: its tables are inputs, and transforms
        applied to it outside any step are part of this step."""
        self.tables |= trace.tables
        if trace.step is None and trace.operations and id(pcoll) not in self.implicit:
            self.implicit.add(id(pcoll))
            self.operations.extend(trace.operations)
            self.black_box |= trace.black_box


class BeamSession:
    """The :class:`provplug.plugin.protocols.AdapterSession` of a Beam ``Pipeline``."""

    def __init__(self, pipeline: beam.Pipeline, run: RunRecorder) -> None:
        self.pipeline = pipeline
        self.run = run
        self._traces: dict[int, tuple[Any, Trace]] = {}
        self._plain: dict[int, Any] = {}
        self._tables: list[TableInfo] = []
        self._ops: list[OpInfo] = []
        self._step: StepScope | None = None
        self._bypass = 0
        self._tokens = itertools.count(1)
        self._calls: dict[str, int] = {}  # step name -> times called
        self._recipes: dict[int, tuple[Any, _Recipe]] = {}  # plain PCollection id -> (it, how to trace it)
        self._implicit = 0  # > 0 while tracing a recipe
        self._result: Any = None
        self._closed = False  # close() ran
        self._scratch: Destination | None = None
        self._columns: dict[int, tuple[str, ...]] = {}  # table id -> columns (step outputs' once run)
        self._row_rules: list[tuple[int, int, rowstate.RowsFn]] = []  # (op, output table, its rows)
        self._rows: dict[int, int] = {}  # table id -> its rows (step outputs' once run)
        self._rated: list[rated.RatedOutput] = []  # outputs of declared steps, stored as location edges
        self._modules_open: set[int] = set()  # ids of the transforms outside steps being applied
        self._original_apply = internals.install(pipeline, self._apply)
        self._original_run = internals.replace_run(pipeline, self._run_once)

    # -- AdapterSession ----------------------------------------------------------
    def source(self, data: Any, name: str) -> Any:
        table = self.run.new_table(name, "source", ())
        label = f"provplug:{name}"
        with self._internal():
            if isinstance(data, beam.pvalue.PCollection):
                if self._trace(data) is not None:
                    raise CaptureError(f"source {name!r} is already a captured table")
                plain_type = data.element_type
                numbered = (
                    data | f"{label}/Trace" >> beam.Map(lambda v: (v, {})) | f"{label}/Number" >> NumberByContent()
                )
            elif isinstance(data, beam.PTransform):
                read = self.pipeline | f"{label}/Read" >> data
                plain_type = read.element_type
                numbered = (
                    read | f"{label}/Trace" >> beam.Map(lambda v: (v, {})) | f"{label}/Number" >> NumberByContent()
                )
            else:
                return self._source_in_memory(_rows_of(data), table, label)
        return self._materialize(numbered, table, None, label, plain_type)

    def _source_in_memory(self, rows: list[Any], table: TableInfo, label: str) -> Any:
        """A source given in memory is laid out, stored and numbered here, on
        the driver (row i is the i-th element), the same way ``Materialize``
        does it in the pipeline; the pipeline gets ``(value, row)`` pairs and
        gives each cell its id."""
        plain_type = internals.created_type(rows)  # as plain Beam infers it for beam.Create(rows)
        layout = layout_in_memory(rows)
        if self.run.store_rows:
            with self.run.rows_writer(table.table_id) as writer:
                write_in_memory(writer, rows, layout)
        with self._internal():
            # Typed Any, as every traced PCollection (composites read it as
            # the type of plain values).
            created = (
                self.pipeline
                | f"{label}/Create" >> CreateNumbered([(v, i) for i, v in enumerate(rows)], plain_type)
                | f"{label}/Trace"
                >> beam.Map(rebase_in_memory, column_bases(layout, table.table_id)).with_output_types(typehints.Any)
            )
        self.run.record_table(
            dataclasses.replace(table, columns=layout[0], rows=len(rows), stored_rows=self.run.store_rows)
        )
        self._columns[table.table_id] = layout[0]
        self._rows[table.table_id] = len(rows)
        self._register(
            created,
            Trace(
                frozenset({table.table_id}),
                None,
                internals.PlainType.known(plain_type),
                rows=rowstate.table(table.table_id),
                table=table.table_id,
            ),
        )
        return created

    def run_step(self, step: StepInfo, func: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        started = _now()
        # A step called again is labelled, and names its tables, "<name>#<n>".
        calls = self._calls[step.name] = self._calls.get(step.name, 0) + 1
        suffix = "" if calls == 1 else f"#{calls}"
        scope = StepScope(next(self._tokens), step.name + suffix, rates=self._declared_rates(step, step.name + suffix))
        for arg in _pcollections((args, kwargs)):
            trace = self._trace(arg)
            if trace is not None:
                scope.read(arg, trace)
        self._step = scope
        try:
            # Under one composite labelled with the step's name, as Beam users
            # label their own composites (and so two steps' labels never clash).
            step_transform = _StepTransform(lambda: func(*args, **kwargs))
            result = self._original_apply(step_transform, beam.pvalue.PBegin(self.pipeline), scope.name)
        finally:
            self._step = None
        results = (result,) if len(step.outputs) == 1 else tuple(result)
        if len(results) != len(step.outputs):
            raise CaptureError(f"step {step.name} returned {len(results)} outputs for {len(step.outputs)} names")
        op_id = self.run.new_op_id()
        outputs = [
            self._output(step, name + suffix, out, op_id, scope)
            for name, out in zip(step.outputs, results, strict=True)
        ]
        op = OpInfo(
            op_id,
            step.name,
            self.run.run_id,
            "udf" if scope.black_box else "builtin",
            tuple(sorted(scope.tables)),
            tuple(t.table_id for t, _ in outputs),
            tuple(scope.operations),
            dict(step.params),
            started,
            _now(),
            None,
        )
        self.run.record_op(op)
        self._ops.append(op)
        rebased = [pc for _, pc in outputs]
        return rebased[0] if len(step.outputs) == 1 else tuple(rebased)

    def close(self, error: BaseException | None) -> None:
        if self._closed:
            return
        self._closed = True
        internals.restore(self.pipeline)
        if error is not None:
            internals.replace_run(self.pipeline, _refuse_run)
            return
        try:
            self._run_once()
        except BaseException:
            internals.replace_run(self.pipeline, _refuse_run)
            raise
        self._record_results()

    # -- running -----------------------------------------------------------------
    def _run_once(self, *args: Any, **kwargs: Any) -> Any:
        """The pipeline runs once, when the capture block ends (or when the
        user calls ``run()`` inside it); later ``run()`` calls get that result."""
        if self._result is None:
            internals.restore(self.pipeline)
            result = self._original_run(*args, **kwargs)
            result.wait_until_finish()
            if str(result.state) not in ("DONE", "PipelineState.DONE"):
                raise CaptureError(f"the Beam pipeline ended in state {result.state}")
            self._result = result
        return self._result

    def _record_results(self) -> None:
        finished = _now()
        counts: dict[int, dict[str, Any]] = {}
        for table in self._tables:
            assert self._scratch is not None  # handed out with the first table
            counts[table.table_id] = summary = json.loads(self._scratch.read_text(summary_name(table.table_id)))
            self._columns[table.table_id], self._rows[table.table_id] = tuple(summary["columns"]), summary["rows"]
        edges = [self._rated_edge(r, counts[r.output_table]["triples"]) for r in self._rated]  # checked first
        for table in self._tables:
            self.run.record_table(
                dataclasses.replace(table, columns=self._columns[table.table_id], rows=self._rows[table.table_id])
            )
        for edge in edges:
            if edge.triple_count:
                self.run.record_location_edge(edge)
        for op in self._ops:
            # The triples an op's outputs stand for (their cells counted, stored or not): the same with edges off.
            triples = sum(counts[t]["triples"] for t in op.outputs)
            self.run.finish_op(op.op_id, triples=triples, finished=finished)
        self._record_row_rules()
        self._record_lineage()

    def _rated_edge(self, output: rated.RatedOutput, counted: int) -> LocationEdge:
        """The edge of a declared step's output, checked to stand for the ``counted`` triples of its cells."""
        edge = rated.rated_edge(output, self._columns, self._rows)
        rated.check_black_box(output, edge, counted)
        return edge

    def _declared_rates(self, step: StepInfo, name: str) -> Rates | None:
        """The rates ``step`` declares when its output is stored as a location
        edge (location lineage on; :mod:`.rated`), else None."""
        if not self.run.location_lineage:
            return None
        rates = rated.declared_rates(step.params, name)
        if rates is not None and len(step.outputs) != 1:
            raise rated.not_one_pardo(name, f"it has {len(step.outputs)} outputs")
        return rates

    def _record_row_rules(self) -> None:
        """What each step output's row lineage means, now that every table's columns are known."""
        inputs = {op.op_id: op.inputs for op in self._ops}
        for op_id, table_id, rows in self._row_rules:
            state = rows(self._columns)
            self.run.record_row_rules(rowstate.op_rules(op_id, table_id, self._columns[table_id], state, inputs[op_id]))

    def _record_lineage(self) -> None:
        """Beam's own Lineage metrics (sources read, sinks written), kept beside the run."""
        try:
            metrics = self._result.metrics()
            found = {label: sorted(Lineage.query(metrics, label)) for label in (Lineage.SOURCE, Lineage.SINK)}
        except (AttributeError, NotImplementedError, ValueError):
            return  # a runner without metrics: nothing to keep
        self.run.attach_text(
            "beam_lineage.json", json.dumps({"sources": found[Lineage.SOURCE], "sinks": found[Lineage.SINK]}, indent=1)
        )

    # -- tables ------------------------------------------------------------------
    def _materialize(
        self, numbered: Any, table: TableInfo, op_id: int | None, label: str, plain_type: Any, triples: bool = True
    ) -> Any:
        """Store ``numbered`` as ``table`` (with the triples of op ``op_id``
        unless an edge stands for them); return its elements rebased on it."""
        if self._scratch is None:
            self._scratch = self.run.scratch_destination("beam")
        target = TableTarget(
            table.table_id,
            table.name,
            op_id,
            self.run.rows_destination(table.table_id) if self.run.store_rows else None,
            self.run.triples_destination() if op_id is not None and triples else None,
            self._scratch,
            self.run.row_lineage_destination() if op_id is not None else None,
        )
        with self._internal():
            rebased = numbered | f"{label}/Materialize" >> Materialize(target)
        self._tables.append(dataclasses.replace(table, stored_rows=self.run.store_rows))
        if not isinstance(plain_type, internals.PlainType):
            plain_type = internals.PlainType.known(plain_type)
        self._register(
            rebased,
            Trace(
                frozenset({table.table_id}), None, plain_type, rows=rowstate.table(table.table_id), table=table.table_id
            ),
        )
        return rebased

    def _output(self, step: StepInfo, name: str, out: Any, op_id: int, scope: StepScope) -> tuple[TableInfo, Any]:
        if not isinstance(out, beam.pvalue.PCollection):
            raise CaptureError(f"step {step.name} must return a PCollection for {name!r}, not {type(out).__name__}")
        out = self._traced_of(out)
        if scope.rates is not None:
            return self._rated_output(name, out, op_id, scope)
        trace = self._trace(out)
        label = f"provplug:{name}"
        plain_type = out.element_type
        rows: rowstate.RowsFn = rowstate.no_input
        with self._internal():
            if trace is None:  # built without reading a captured table: no parents
                out = out | f"{label}/Trace" >> beam.Map(lambda v: (v, {}))
            else:
                scope.read(out, trace)
                plain_type, rows = trace.plain_type, trace.rows
            numbered = out | f"{label}/Number" >> NumberByContent()
        table = self.run.new_table(name, "output", ())
        self._row_rules.append((op_id, table.table_id, rows))
        return table, self._materialize(numbered, table, op_id, label, plain_type)

    def _rated_output(self, name: str, out: Any, op_id: int, scope: StepScope) -> tuple[TableInfo, Any]:
        """The output of a step declared with rates: numbered by its ParDo and
        stored without triples (a location edge stands for them, :mod:`.rated`)."""
        if scope.rated is None or out is not scope.rated:
            raise rated.not_one_pardo(scope.name, "it does not return the output of one such transform")
        assert scope.rates is not None and scope.rated_input is not None
        trace = self._trace_of(out)
        table = self.run.new_table(name, "output", ())
        self._row_rules.append((op_id, table.table_id, trace.rows))
        self._rated.append(rated.RatedOutput(scope.name, op_id, scope.rated_input, table.table_id, scope.rates))
        return table, self._materialize(out, table, op_id, f"provplug:{name}", trace.plain_type, triples=False)

    # -- the apply interceptor -----------------------------------------------------
    def _apply(self, original: Callable[..., Any], transform: Any, pvalueish: Any, label: str | None) -> Any:
        if self._bypass:
            return original(transform, pvalueish, label)
        transform, label = internals.unname(transform, label)
        if isinstance(transform, _Composite):  # Beam re-applies a labelled transform
            return original(transform, pvalueish, label)
        if self._step is None and not self._implicit and id(transform) not in self._modules_open:
            # A user's composite is a module of the steps it calls (zoom queries);
            # Beam applies a labelled transform once more, in the same module.
            self._modules_open.add(id(transform))
            try:
                with _composite_module(label or transform.label):
                    return self._dispatch(original, transform, pvalueish, label)
            finally:
                self._modules_open.discard(id(transform))
        return self._dispatch(original, transform, pvalueish, label)

    def _dispatch(self, original: Callable[..., Any], transform: Any, pvalueish: Any, label: str | None) -> Any:
        scope = self._step
        inputs = list(_pcollections(pvalueish))
        traced = [pc for pc in inputs if self._trace(pc) is not None]
        if not traced:
            if any(self._recipe(pc) is not None for pc in inputs):
                if scope is not None or self._implicit:  # captured data read: through its traced counterpart
                    return self._apply(original, transform, _replace(pvalueish, self._traced_of), label)
                result = original(transform, pvalueish, label)
                self._remember(result, _Recipe(transform, pvalueish, label or transform.label, result))
                return result
            return original(transform, pvalueish, label)
        name = label or transform.label
        if scope is None:
            return self._apply_outside(original, transform, pvalueish, name, traced)
        self._check_inputs(pvalueish, scope)
        for pc in traced:
            scope.read(pc, self._trace_of(pc))
        if scope.rates is not None:
            return self._apply_rated(original, transform, pvalueish, name, scope)
        tables = frozenset().union(*(self._trace_of(pc).tables for pc in traced))
        input_type = self._trace_of(traced[0]).plain_type
        rule = rule_for(transform, f"step {scope.name}: {name}", self._plain_of, input_type)
        if rule is None:
            return self._expand_composite(original, transform, pvalueish, label, f"step {scope.name}:")
        with self._internal():
            result = original(Expansion(rule), pvalueish, name)
        scope.operations.append(rule.operation)
        scope.black_box |= rule.black_box
        self._register(
            result, Trace(tables, scope.token, input_type.after(transform), rows=self._rows_after(rule, pvalueish))
        )
        return result

    def _apply_rated(
        self, original: Callable[..., Any], transform: Any, pvalueish: Any, name: str, scope: StepScope
    ) -> Any:
        """The one ParDo of a step declared with rates, over one stored table
        (:mod:`.rated`): its output comes numbered by position."""
        if scope.rated is not None:
            raise rated.not_one_pardo(scope.name, f"{name} is a second transform")
        inputs = list(_pcollections(pvalueish))
        if len(inputs) != 1:
            raise rated.not_one_pardo(scope.name, f"{name} reads {len(inputs)} PCollections")
        trace = self._trace_of(inputs[0])
        if trace.table is None:
            raise rated.not_one_pardo(scope.name, f"{name} reads data transformed outside any step, not a stored table")
        assert scope.rates is not None
        rule = rated_rule(transform, name, scope.name, self._plain_of, scope.rates.production)
        with self._internal():
            result = original(Expansion(rule), pvalueish, name)
        scope.operations.append(rule.operation)
        scope.black_box |= rule.black_box
        self._register(
            result,
            Trace(trace.tables, scope.token, trace.plain_type.after(transform), rows=self._rows_after(rule, pvalueish)),
        )
        scope.rated, scope.rated_input = result, trace.table
        return result

    def _apply_outside(
        self, original: Callable[..., Any], transform: Any, pvalueish: Any, name: str, traced: list[Any]
    ) -> Any:
        """A transform outside any step reading captured data. One a rule
        traces is traced (the step that reads its result takes it into its
        op). Any other (a composite, a sink, ``Map(print)``) sees plain
        values; if a step reads its result after all, it is applied again,
        traced, to the traced inputs (:meth:`_traced_of`), or the step fails
        with a ``CaptureError`` naming it — the lineage is never cut."""
        traces = [self._trace_of(pc) for pc in traced]
        input_type = traces[0].plain_type
        rule, refusal = None, None
        if len(traced) == len(list(_pcollections(pvalueish))):
            try:
                rule = rule_for(transform, name, self._plain_of, input_type)
            except CaptureError as exc:  # e.g. a DoFn asking for windows
                refusal = exc
        if rule is None:
            if self._implicit:
                if refusal is not None:
                    raise refusal
                return self._expand_composite(original, transform, pvalueish, name, "applied outside any step:")
            result = original(transform, _replace(pvalueish, self._plain_of), name)
            self._remember(result, _Recipe(transform, pvalueish, name, result))
            return result
        with self._internal():
            result = original(Expansion(rule), pvalueish, name)
        self._register(
            result,
            Trace(
                frozenset().union(*(t.tables for t in traces)),
                None,
                input_type.after(transform),
                (*(op for t in traces for op in t.operations), rule.operation),
                any(t.black_box for t in traces) or rule.black_box,
                self._rows_after(rule, pvalueish),
            ),
        )
        return result

    def _rows_after(self, rule: Rule, pvalueish: Any) -> rowstate.RowsFn:
        """The row lineage of ``rule``'s output, from that of its (traced) inputs."""
        if isinstance(pvalueish, dict):
            tagged: list[tuple[Any, Any]] = list(pvalueish.items())
        elif isinstance(pvalueish, (tuple, list)):
            tagged = list(enumerate(pvalueish))
        else:
            tagged = [(None, pvalueish)]
        return rowstate.applied(rule.rows, [(tag, self._trace_of(pc).rows) for tag, pc in tagged])

    def _expand_composite(
        self, original: Callable[..., Any], transform: Any, pvalueish: Any, label: str | None, where: str
    ) -> Any:
        """An unknown transform is expanded with this interceptor still on:
        a composite of understood transforms is traced through its parts.
        It is applied through a wrapper without the composite's type hints
        (they describe plain values, not traced ones)."""
        name = label or transform.label
        result = original(_Composite(transform), pvalueish, name)
        outputs = list(_pcollections(result))
        if not outputs or any(self._trace(pc) is None for pc in outputs):
            raise CaptureError(f"{where} {name} ({type(transform).__name__}) cannot be captured")
        first = next(t.plain_type for pc in _pcollections(pvalueish) if (t := self._trace(pc)) is not None)
        for pc in outputs:  # the composite's declared output type, as Beam gives it
            inner = self._trace_of(pc)
            self._register(
                pc, dataclasses.replace(inner, plain_type=_declared(inner.plain_type, first.after(transform)))
            )
        return result

    def _check_inputs(self, pvalueish: Any, scope: StepScope) -> None:
        for pc in _pcollections(pvalueish):
            trace = self._trace(pc)
            if trace is None:
                raise CaptureError(f"step {scope.name}: a transform mixes captured and uncaptured PCollections")
            if trace.step not in (None, scope.token):
                raise CaptureError(f"step {scope.name} uses an intermediate PCollection of another step")

    # -- transforms outside steps that only plain code has read so far ----------------
    def _recipe(self, pcoll: Any) -> _Recipe | None:
        entry = self._recipes.get(id(pcoll))
        return entry[1] if entry is not None and entry[0] is pcoll else None

    def _remember(self, result: Any, recipe: _Recipe) -> None:
        for pc in _pcollections(result):
            if self._trace(pc) is None:  # a step's output (a composite's) is traced already
                self._recipes[id(pc)] = (pc, recipe)

    def _traced_of(self, pcoll: Any) -> Any:
        """The traced counterpart of a PCollection plain code made from
        captured data outside any step (built once, when a step first reads
        it: its transform applied again to the traced inputs); any other
        PCollection as it is."""
        recipe = self._recipe(pcoll) if isinstance(pcoll, beam.pvalue.PCollection) else None
        if recipe is None:
            return pcoll
        if recipe.traced is None:
            inputs = _replace(recipe.pvalueish, self._traced_of)
            step, self._step = self._step, None
            self._implicit += 1
            try:
                recipe.traced = self.pipeline.apply(recipe.transform, inputs, f"{recipe.name} [traced]")
            except CaptureError as exc:
                raise CaptureError(
                    f"{recipe.name} ({type(recipe.transform).__name__}), applied outside any step to captured "
                    f"data a step reads, cannot be captured ({exc}); apply it inside a step"
                ) from exc
            finally:
                self._implicit -= 1
                self._step = step
        plain, traced = list(_pcollections(recipe.result)), list(_pcollections(recipe.traced))
        return traced[next(i for i, pc in enumerate(plain) if pc is pcoll)]

    # -- bookkeeping ---------------------------------------------------------------
    def _register(self, pcoll: Any, trace: Trace) -> None:
        for pc in _pcollections(pcoll):
            self._traces[id(pc)] = (pc, trace)

    def _trace_of(self, pcoll: Any) -> Trace:
        trace = self._trace(pcoll)
        assert trace is not None
        return trace

    def _trace(self, pcoll: Any) -> Trace | None:
        entry = self._traces.get(id(pcoll))
        return entry[1] if entry is not None and entry[0] is pcoll else None

    def _plain_of(self, pcoll: Any) -> Any:
        """The values of a traced PCollection without their provenance."""
        if self._trace(pcoll) is None:
            return pcoll
        if id(pcoll) not in self._plain:
            with self._internal():
                plain = pcoll | f"provplug:Plain{len(self._plain)}" >> beam.Map(lambda e: e[0])
            self._plain[id(pcoll)] = plain
            # A step called on it (inside a composite that sees plain values) reads ``pcoll``.
            self._remember(plain, _Recipe(None, pcoll, "provplug:Plain", plain, pcoll))
        return self._plain[id(pcoll)]

    class _Internal:
        def __init__(self, session: BeamSession) -> None:
            self.session = session

        def __enter__(self) -> None:
            self.session._bypass += 1

        def __exit__(self, *exc: object) -> None:
            self.session._bypass -= 1

    def _internal(self) -> BeamSession._Internal:
        """Transforms the adapter applies itself are not intercepted."""
        return BeamSession._Internal(self)


class _StepTransform(beam.PTransform[Any, Any]):
    """A step's transforms, grouped in the pipeline graph under its name."""

    def __init__(self, build: Callable[[], Any]) -> None:
        super().__init__()
        self.build = build

    def expand(self, pbegin: Any) -> Any:
        return self.build()


def _declared(inner: internals.PlainType, declared: internals.PlainType) -> internals.PlainType:
    """A composite's output type: its last part's, else the composite's declared one."""
    return internals.PlainType(lambda: inner() if inner() != typehints.Any else declared())


@dataclasses.dataclass(eq=False)
class _Recipe:
    """A transform applied outside any step to captured data, on plain values."""

    transform: Any
    pvalueish: Any  # its input as given (traced PCollections, or other recipes' results)
    name: str
    result: Any  # what plain code got
    traced: Any = None  # the traced counterpart, once a step reads it


class _Composite(beam.PTransform[Any, Any]):
    """A user's composite expanded as is, without its type hints."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner

    def _extract_input_pvalues(self, pvalueish: Any) -> Any:
        return self.inner._extract_input_pvalues(pvalueish)

    def expand(self, pvalueish: Any) -> Any:
        return self.inner.expand(pvalueish)


def _composite_module(label: str) -> contextlib.AbstractContextManager[None]:
    """``provplug.module(label)``: dots inside read as nesting, as in any module name."""
    name = label.strip(". ")
    return module(name) if name else contextlib.nullcontext()


def _refuse_run(*args: Any, **kwargs: Any) -> Any:
    raise CaptureError("this Beam pipeline's capture failed; build a new pipeline to run it again")


def _rows_of(data: Any) -> list[Any]:
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # a pandas DataFrame
        return list(data.to_dict("records"))
    if isinstance(data, (str, bytes)) or not hasattr(data, "__iter__"):
        raise CaptureError(f"cannot register a {type(data).__name__} as a Beam source")
    return list(data)


def _pcollections(pvalueish: Any) -> Iterator[Any]:
    """The PCollections inside a transform input or output (tuples, lists, dicts)."""
    if isinstance(pvalueish, beam.pvalue.PCollection):
        yield pvalueish
    elif isinstance(pvalueish, dict):
        for v in pvalueish.values():
            yield from _pcollections(v)
    elif isinstance(pvalueish, (tuple, list, beam.pvalue.DoOutputsTuple)):
        for v in pvalueish:
            yield from _pcollections(v)


def _replace(pvalueish: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(pvalueish, beam.pvalue.PCollection):
        return fn(pvalueish)
    if isinstance(pvalueish, dict):
        return {k: _replace(v, fn) for k, v in pvalueish.items()}
    if isinstance(pvalueish, (tuple, list)):
        return type(pvalueish)(_replace(v, fn) for v in pvalueish)
    return pvalueish
