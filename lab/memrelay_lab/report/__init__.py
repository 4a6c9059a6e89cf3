"""The report of a results folder (``report.html``, ``report.md``, CSV tables, PNG figures).
Reads `results` and `analysis`; computes no analysis itself."""

from ._write import Report, write_report

__all__ = ["Report", "write_report"]
