"""Jupyter views of the store (anywidget). Imported as ``rmqstore.widgets``."""

__all__: list[str] = []
