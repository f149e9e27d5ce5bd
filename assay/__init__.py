"""Assay: evaluations of LLMs and agents as a data pipeline, stored as Parquet."""

__version__ = "0.1.0"
