"""The built-in reductions of paper 001 (Chapter 4), registered as a plugin.

Every choice is made in Spark, beside the data:

* a random choice is a seeded hash of the row's values (``xxhash64``) mapped
  to [0, 1): the same content gives the same decision in every mode and run;
* ``sample``: simple random sampling without replacement: each row is kept
  when its hash falls below ``ratio`` (Bernoulli; about ``ratio`` of the rows);
* sampling within groups (``stratified``, and the ``"sample"`` variant of
  ``histogram``, ``kmeans`` and ``equivalence``): in each group exactly
  ``round(ratio * n)`` rows (half up), those with the smallest hashes — the
  thesis's "66% of every stratum" (4 of 6);
* eliminating groups (the ``"eliminate"`` variant): whole groups are kept —
  those named (``buckets``/``clusters``/``classes``), or, with ``ratio``, groups
  in order (histogram: most frequent first; clusters and classes: a seeded
  order) until at least ``ratio`` of the rows are kept. Group sizes come from
  one Spark aggregation (a handful of rows reach the driver);
* ``keep(where=...)``: the rows a SQL predicate holds for: an explicit
  selection (a thesis table's particular draw, injected).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from provplug.errors import ReductionError
from provplug.plugin.markers import hookimpl
from provplug.plugin.reductions import Reduction, check_ratio, check_seed, check_variant

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

GROUP = "_provplug_group"  # helper columns, dropped before a selection is returned
HASH = "_provplug_hash"
HASH_BITS = 52


def quoted(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def uniform(seed: int, columns: Sequence[str]) -> Column:
    """A number in [0, 1) per row: a seeded hash of the row's ``columns``."""
    from pyspark.sql import functions as F

    hashed = F.xxhash64(F.lit(seed), *[quoted(c) for c in columns])
    return F.pmod(hashed, F.lit(1 << HASH_BITS)).cast("double") / float(1 << HASH_BITS)


def _columns(frame: DataFrame, columns: Sequence[str] | None) -> list[str]:
    return list(columns) if columns is not None else list(frame.columns)


def sample_within(grouped: DataFrame, ratio: float, seed: int, columns: Sequence[str]) -> DataFrame:
    """Of each ``GROUP`` of ``grouped``, the ``round(ratio * n)`` rows with the smallest hashes."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    window = Window.partitionBy(GROUP)
    ranked = grouped.withColumn(HASH, uniform(seed, columns))
    ranked = ranked.withColumns(
        {
            "_provplug_rank": F.row_number().over(window.orderBy(HASH)),
            "_provplug_wanted": F.floor(F.count(F.lit(1)).over(window) * ratio + 0.5),
        }
    )
    return ranked.filter(F.col("_provplug_rank") <= F.col("_provplug_wanted")).drop(
        "_provplug_rank", "_provplug_wanted", HASH
    )


def group_sizes(grouped: DataFrame) -> list[tuple[Any, int]]:
    """(group, rows) of every ``GROUP`` of ``grouped`` (one aggregation)."""
    return [(r[GROUP], int(r["count"])) for r in grouped.groupBy(GROUP).count().collect()]


def groups_until(sizes: Sequence[tuple[Any, int]], ratio: float, order: Callable[[tuple[Any, int]], Any]) -> list[Any]:
    """Groups taken in ``order`` until they hold at least ``ratio`` of all rows."""
    total = sum(n for _, n in sizes)
    kept: list[Any] = []
    held = 0
    for group, n in sorted(sizes, key=order):
        if held >= ratio * total:
            break
        kept.append(group)
        held += n
    return kept


def seeded_order(seed: int) -> Callable[[tuple[Any, int]], Any]:
    """A seeded, reproducible order of groups (by a hash of their value)."""

    def key(item: tuple[Any, int]) -> Any:
        return hashlib.sha256(f"{seed}:{item[0]!r}".encode()).hexdigest()

    return key


def keep_groups(grouped: DataFrame, groups: Sequence[Any]) -> DataFrame:
    from pyspark.sql import functions as F

    values = [g for g in groups if g is not None]
    condition = F.col(GROUP).isin(values) if values else F.lit(False)
    if len(values) < len(groups):  # the group of rows without a value
        condition = condition | F.col(GROUP).isNull()
    return grouped.filter(condition)


# -- the techniques ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Sample(Reduction):
    """Simple random sampling without replacement (§4.2): ``ratio``."""

    def select(self, frame: DataFrame, columns: Sequence[str] | None = None) -> DataFrame:
        ratio = check_ratio(self.params["ratio"])
        return frame.filter(uniform(self.seed, _columns(frame, columns)) < ratio)


@dataclasses.dataclass(frozen=True)
class Keep(Reduction):
    """An explicit selection: the rows where the SQL predicate ``where`` holds."""

    def select(self, frame: DataFrame, columns: Sequence[str] | None = None) -> DataFrame:
        from pyspark.errors import PySparkException
        from pyspark.sql import functions as F

        try:
            return frame.filter(F.expr(str(self.params["where"])))
        except PySparkException as exc:
            raise ReductionError(
                f"keep: where={self.params['where']!r} is not a predicate on the table: {str(exc).splitlines()[0]}"
            ) from None


@dataclasses.dataclass(frozen=True)
class Grouped(Reduction):
    """A reduction over groups of rows: each technique says what a row's
    group is; the ``variant`` eliminates groups or samples within them."""

    # The parameter naming the groups an "eliminate" variant keeps.
    chosen_param = "groups"

    def group(self, frame: DataFrame) -> DataFrame:
        """``frame`` with its rows' group in a ``GROUP`` column."""
        raise NotImplementedError

    def order(self) -> Callable[[tuple[Any, int]], Any]:
        """Which groups an "eliminate" variant with a ``ratio`` takes first."""
        return seeded_order(self.seed)

    def chosen(self, grouped: DataFrame) -> list[Any]:
        named = self.params.get(self.chosen_param)
        if named is not None:
            return list(named) if isinstance(named, (list, tuple)) else [named]
        return groups_until(group_sizes(grouped), check_ratio(self.params["ratio"]), self.order())

    def select(self, frame: DataFrame, columns: Sequence[str] | None = None) -> DataFrame:
        grouped = self.group(frame)
        if check_variant(self.params["variant"]) == "sample":
            kept = sample_within(grouped, check_ratio(self.params["ratio"]), self.seed, _columns(frame, columns))
        else:
            kept = keep_groups(grouped, self.chosen(grouped))
        return kept.select(*[quoted(c) for c in frame.columns])


@dataclasses.dataclass(frozen=True)
class Stratified(Grouped):
    """Stratified sampling (§4.2): ``ratio`` of each stratum, the strata
    being the values of ``attribute``."""

    def group(self, frame: DataFrame) -> DataFrame:
        return frame.withColumn(GROUP, quoted(self.params["attribute"]))


@dataclasses.dataclass(frozen=True)
class Equivalence(Grouped):
    """Equivalence classes (§4.5): the classes are the values of ``attribute``."""

    chosen_param = "classes"

    def group(self, frame: DataFrame) -> DataFrame:
        return frame.withColumn(GROUP, quoted(self.params["attribute"]))


@dataclasses.dataclass(frozen=True)
class Histogram(Grouped):
    """Histogram (§4.3): buckets of ``width`` over ``attribute``, from its
    minimum; "eliminate" keeps the ``buckets`` most frequent (the thesis: 1)."""

    chosen_param = "bucket_ids"

    def group(self, frame: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        attribute = quoted(self.params["attribute"])
        lowest = frame.agg(F.min(attribute)).first()
        low = lowest[0] if lowest is not None else None
        if low is None:
            return frame.withColumn(GROUP, F.lit(None).cast("long"))
        return frame.withColumn(GROUP, F.floor((attribute - F.lit(low)) / float(self.params["width"])))

    def order(self) -> Callable[[tuple[Any, int]], Any]:
        return lambda item: (item[0] is None, -item[1], item[0])  # most frequent first; ties: lower bucket

    def chosen(self, grouped: DataFrame) -> list[Any]:
        if self.params.get("ratio") is not None:
            return super().chosen(grouped)
        sizes = [s for s in group_sizes(grouped) if s[0] is not None]
        return [g for g, _ in sorted(sizes, key=self.order())[: int(self.params.get("buckets") or 1)]]


@dataclasses.dataclass(frozen=True)
class KMeansClusters(Grouped):
    """K-means clustering (§4.4) of the rows on ``attributes`` into ``k``
    clusters (``pyspark.ml``, seeded; missing values count as 0). An
    ``assignment`` (a SQL expression giving each row's cluster) replaces
    the clustering: a given partition, such as the thesis's Table 4.5."""

    chosen_param = "clusters"

    def group(self, frame: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        if self.params.get("assignment"):
            return frame.withColumn(GROUP, F.expr(str(self.params["assignment"])))
        from pyspark.ml.clustering import KMeans
        from pyspark.ml.feature import VectorAssembler

        attributes = list(self.params["attributes"])
        features = frame.withColumns(
            {f"_provplug_f{i}": F.coalesce(quoted(a).cast("double"), F.lit(0.0)) for i, a in enumerate(attributes)}
        )
        assembler = VectorAssembler(
            inputCols=[f"_provplug_f{i}" for i in range(len(attributes))], outputCol="_provplug_features"
        )
        vectors = assembler.transform(features)
        model = KMeans(
            k=int(self.params["k"]), seed=self.seed, featuresCol="_provplug_features", predictionCol="_provplug_cluster"
        ).fit(vectors)
        # Cluster ids numbered by their centres (sorted): the same clusters get
        # the same ids however the rows are partitioned.
        centres = [tuple(float(x) for x in c) for c in model.clusterCenters()]
        rank = {i: sorted(range(len(centres)), key=lambda j: centres[j]).index(i) for i in range(len(centres))}
        relabel = F.element_at(F.array(*[F.lit(rank[i]) for i in range(len(centres))]), F.col("_provplug_cluster") + 1)
        return model.transform(vectors).withColumn(GROUP, relabel)


# -- construction ---------------------------------------------------------------------------
def _eliminate_or_ratio(variant: str, ratio: float | None, named: Any, what: str) -> None:
    if variant == "sample" and ratio is None:
        raise ReductionError(f"sampling within {what} needs a ratio")
    if variant == "eliminate" and ratio is None and named is None:
        raise ReductionError(f"eliminating {what} needs the {what} to keep or a ratio")
    if ratio is not None:
        check_ratio(ratio)


def _as_list(value: Any) -> list[Any] | None:
    """A list of group names; one name (a spec's ``classes=Australia``) is a list of one."""
    if value is None:
        return None
    return list(value) if isinstance(value, (list, tuple)) else [value]


def sample(ratio: float, seed: int = 0) -> Reduction:
    """Simple random sampling without replacement: keep about ``ratio`` of the rows."""
    return Sample("sample", {"ratio": check_ratio(ratio)}, check_seed(seed))


def stratified(attribute: str, ratio: float, seed: int = 0) -> Reduction:
    """Stratified sampling: ``round(ratio * n)`` rows of each stratum (value of ``attribute``)."""
    return Stratified(
        "stratified", {"attribute": attribute, "ratio": check_ratio(ratio), "variant": "sample"}, check_seed(seed)
    )


def histogram(
    attribute: str,
    width: float,
    *,
    variant: str = "eliminate",
    buckets: int | None = None,
    ratio: float | None = None,
    seed: int = 0,
) -> Reduction:
    """Histogram buckets of ``width`` over ``attribute``. ``variant="eliminate"``
    keeps the ``buckets`` most frequent buckets (default 1, the thesis's), or
    with ``ratio`` the most frequent ones until ``ratio`` of the rows;
    ``variant="sample"`` keeps ``ratio`` of every bucket."""
    check_variant(variant)
    if not isinstance(width, (int, float)) or isinstance(width, bool) or width <= 0 or not math.isfinite(width):
        raise ReductionError(f"histogram width must be a positive number, not {width!r}")
    if variant == "sample" and ratio is None:
        raise ReductionError("sampling within buckets needs a ratio")
    if ratio is not None:
        check_ratio(ratio)
    if buckets is not None and (isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 1):
        raise ReductionError(f"buckets must be a positive number of buckets, not {buckets!r}")
    params = {"attribute": attribute, "width": width, "variant": variant, "buckets": buckets, "ratio": ratio}
    return Histogram("histogram", params, check_seed(seed))


def kmeans(
    attributes: Sequence[str] | str,
    k: int,
    *,
    variant: str = "sample",
    ratio: float | None = None,
    clusters: Sequence[int] | None = None,
    assignment: str | None = None,
    seed: int = 0,
) -> Reduction:
    """K-means clusters of the rows on ``attributes``; ``variant="eliminate"``
    keeps the ``clusters`` named (cluster ids) or, with ``ratio``, clusters in a
    seeded order until ``ratio`` of the rows; ``variant="sample"`` keeps
    ``ratio`` of every cluster. ``assignment``: a SQL expression giving each
    row's cluster id instead of fitting k-means (an injected clustering)."""
    check_variant(variant)
    _eliminate_or_ratio(variant, ratio, clusters, "clusters")
    names = [attributes] if isinstance(attributes, str) else list(attributes)
    if not names:
        raise ReductionError("k-means needs at least one attribute")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ReductionError(f"k must be a positive number of clusters, not {k!r}")
    params = {
        "attributes": names,
        "k": k,
        "variant": variant,
        "ratio": ratio,
        "clusters": _as_list(clusters),
        "assignment": assignment,
    }
    return KMeansClusters("kmeans", params, check_seed(seed))


def equivalence(
    attribute: str,
    *,
    variant: str = "sample",
    ratio: float | None = None,
    classes: Sequence[Any] | None = None,
    seed: int = 0,
) -> Reduction:
    """Equivalence classes by the value of ``attribute``; ``variant="eliminate"``
    keeps the ``classes`` named (values) or, with ``ratio``, classes in a seeded
    order until ``ratio`` of the rows; ``variant="sample"`` keeps ``ratio`` of every class."""
    check_variant(variant)
    _eliminate_or_ratio(variant, ratio, classes, "classes")
    params = {"attribute": attribute, "variant": variant, "ratio": ratio, "classes": _as_list(classes)}
    return Equivalence("equivalence", params, check_seed(seed))


def keep(where: str) -> Reduction:
    """An explicit selection: the rows where the SQL predicate ``where`` holds."""
    if not isinstance(where, str) or not where.strip():
        raise ReductionError("keep needs a SQL predicate: where=...")
    return Keep("keep", {"where": where}, 0)


# -- registration ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Technique:
    """A built-in technique as the hook registers it (see ReductionTechnique)."""

    name: str
    description: str
    factory: Callable[..., Reduction]

    def build(self, params: Mapping[str, Any], seed: int) -> Reduction:
        arguments = dict(params)
        if self.name != "keep":
            arguments["seed"] = seed
        try:
            return self.factory(**arguments)
        except TypeError as exc:
            raise ReductionError(f"reduction {self.name}: {exc}") from None


BUILTIN = (
    Technique("sample", "simple random sampling: ratio", sample),
    Technique("stratified", "stratified sampling: attribute, ratio", stratified),
    Technique(
        "histogram",
        "histogram buckets: attribute, width, variant=eliminate (buckets|ratio) or sample (ratio)",
        histogram,
    ),
    Technique(
        "kmeans",
        "k-means clusters: attributes, k, variant=eliminate (clusters|ratio) or sample (ratio), assignment",
        kmeans,
    ),
    Technique(
        "equivalence",
        "equivalence classes: attribute, variant=eliminate (classes|ratio) or sample (ratio)",
        equivalence,
    ),
    Technique("keep", "an explicit selection: where (a SQL predicate)", keep),
)


@hookimpl
def provplug_register_reductions(register: Callable[[Any], None]) -> None:
    for technique in BUILTIN:
        register(technique)
