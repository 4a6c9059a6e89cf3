"""The report of a results folder (``report.html``, ``report.md``, CSV tables, PNG figures).
Reads `results` and `analysis`; computes no analysis itself."""

from ._format import CI_TARGET, format_interval, format_number, interval_warning
from ._write import Report, write_report

__all__ = ["CI_TARGET", "Report", "format_interval", "format_number", "interval_warning", "write_report"]
