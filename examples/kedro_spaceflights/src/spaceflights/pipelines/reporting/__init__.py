"""Summaries of the model input table."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
