"""The data_processing modular pipeline (namespace ``data_processing``)."""

from __future__ import annotations

from kedro.pipeline import Pipeline, node, pipeline

from .nodes import create_model_input_table, preprocess_companies, preprocess_shuttles


def create_pipeline(**kwargs: object) -> Pipeline:
    return pipeline(
        [
            node(preprocess_companies, "companies", "preprocessed_companies", name="preprocess_companies_node"),
            node(preprocess_shuttles, "shuttles", "preprocessed_shuttles", name="preprocess_shuttles_node"),
            node(
                create_model_input_table,
                ["preprocessed_shuttles", "preprocessed_companies", "reviews"],
                "model_input_table",
                name="create_model_input_table_node",
            ),
        ],
        namespace="data_processing",
        # Catalog entries shared with the rest of the project keep their names;
        # the preprocessed tables become data_processing.preprocessed_*.
        inputs={"companies", "shuttles", "reviews"},
        outputs={"model_input_table"},
    )
