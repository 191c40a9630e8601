"""Clean the raw companies and shuttles and join them with the reviews."""

from .pipeline import create_pipeline

__all__ = ["create_pipeline"]
