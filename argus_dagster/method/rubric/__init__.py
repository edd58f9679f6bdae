"""Rubrics (method §2–§4): schema, taxonomy, post-processing and the offline generator."""
