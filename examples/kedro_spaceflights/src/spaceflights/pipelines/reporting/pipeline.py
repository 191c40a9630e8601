"""The reporting modular pipeline (namespace ``reporting``)."""

from __future__ import annotations

from kedro.pipeline import Pipeline, node, pipeline

from .nodes import summarise_by_location, top_rated_shuttles


def create_pipeline(**kwargs: object) -> Pipeline:
    return pipeline(
        [
            node(summarise_by_location, "model_input_table", "price_by_location", name="summarise_by_location_node"),
            node(
                top_rated_shuttles,
                ["model_input_table", "params:top_n"],
                "top_shuttles",
                name="top_rated_shuttles_node",
            ),
        ],
        namespace="reporting",
        inputs={"model_input_table"},
        outputs={"price_by_location", "top_shuttles"},
    )
