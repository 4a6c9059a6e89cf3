"""What a report is made of: sections of paragraphs, tables and figures."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

__all__ = ["Figure", "Section", "Table", "present"]


@dataclass
class Table:
    name: str
    caption: str
    frame: pd.DataFrame  # as shown
    csv: pd.DataFrame | None = None  # as written (default: frame)
    index: bool = False
    unit: str | None = None  # unit of the columns whose name tells none (see `_format.unit_of`)
    units: dict[str, str] = field(default_factory=dict)  # unit per column, overriding names
    row_units: dict[str, str] = field(default_factory=dict)  # unit per row label (index tables)


@dataclass
class Figure:
    name: str
    caption: str
    png: bytes


@dataclass
class Section:
    title: str
    text: list[str] = field(default_factory=list)
    items: list[Table | Figure] = field(default_factory=list)


def present(*items: Table | Figure | None) -> list[Table | Figure]:
    """The tables and figures given, in order, without the Nones (those the data gave nothing to show)."""
    return [item for item in items if item is not None]
