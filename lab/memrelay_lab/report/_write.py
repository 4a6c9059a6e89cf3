"""The report of a results folder: ``report.html``, ``report.md`` and the tables as CSV.

``write_report(results_dir, out_dir, level=0.95)`` loads the folder (`results.load`), reduces
it to configurations (`results.summarize`), builds every section the data allow (each in a
module of its own, `_NAME_section.py`) and writes, in ``out_dir`` (default
``<results_dir>/report``):

- ``report.html``: self-contained (figures inlined as base64 PNG, styles inline, no
  network), with a small inline script that sets ``data-images-loaded="N/M"`` on <body>
  once the page has loaded (N images decoded of M), which the browser test reads;
- ``report.md``: the same text and tables in Markdown, figures as ``figures/*.png``;
- ``tables/*.csv``: every table at full precision.

Sections (each only when the folder's data give it something to show):

1. the runs and the configurations: means over repetitions with Student-t confidence
   intervals at ``level`` (throughput summed over the bench instances; times combined over
   middlewares weighted by request count);
2. throughput and response time against clients (or the swept parameter), one line per
   value of the other swept parameters, with error bars (seed 000 §2-4);
3. the time breakdown on the middleware: queue, servers, the rest of the middleware,
   network (client minus middleware response time);
4. percentiles from histograms merged over repetitions (never averaged), against the
   multi-get size, and response-time histograms on both sides (seed 000 §5);
5. keys read per second against the multi-get size (seed 000 Figure 27);
6. the interactive response-time law, R = N/X - Z and X = N/(R + Z) beside the measured
   values, with Z = client-side minus middleware-side response time (or ``think_time_ms``
   when given, applied to the client-side response time); configurations off by more
   than ``tolerance`` are flagged;
7. a 2^k r factorial analysis when the folder is one (`analysis.factorial_factors`) of
   the clients' throughput and response time (seed 000 Tables 7-10);
8. the queueing models of `analysis`: the MVA network against the measurements
   (seed 000 Tables 32-33) and M/M/1, M/M/m (Tables 22-31), with the measured variance of
   response time; M/M/1 and M/M/m of the read/write mix over the servers (seed 002 §1-2);
   seed 002 §3's per-server network (a GET M/M/m and a SET M/M/1 per server, one response
   queue; Tables 3-4);
9. the maximum-throughput configuration (seed 000 §3.4, 001 §1.2), gets and sets apart
   (seed 001 §2-3), queue and server time distributions from the request log (seed 001
   §1.3), the servers as queueing centres and every process's processor and network use
   (seed 002 §3, seed 004), 2^k r on the extreme levels with additive and multiplicative
   models (seed 002 §4), the held-out predictions and the consistency checks.
"""


from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ..results import load, summarize
from ..theory import DEFAULT_TOLERANCE
from ._breakdown_section import breakdown_section
from ._checks_section import checks_section
from ._configurations_section import configurations_section
from ._document import Table
from ._factorial_models_section import factorial_models_section
from ._factorial_section import factorial_section
from ._interactive_section import interactive_section
from ._keys_section import keys_section
from ._max_throughput_section import max_throughput_section
from ._mix_models_section import mix_models_section
from ._mixed_section import mixed_section
from ._overview_section import overview_section
from ._percentiles_section import percentiles_section
from ._pools_per_server_section import pools_per_server_section
from ._predict_section import predictions_section
from ._proxies_section import proxies_section
from ._queueing_models_section import queueing_models_section
from ._relative_section import relative_section
from ._resources_section import resources_section
from ._throughput_section import throughput_section
from ._time_distributions_section import time_distributions_section
from ._trace_section import trace_section
from ._render import render_html, render_markdown

__all__ = ["Report", "write_report"]


@dataclass(frozen=True)
class Report:
    """What `write_report` wrote and how long it took."""

    out_dir: Path
    html: Path
    markdown: Path
    tables: dict[str, Path]
    figures: dict[str, Path]
    sections: tuple[str, ...]
    notes: tuple[str, ...]
    elapsed_s: float


def write_report(
    results_dir: str | Path,
    out_dir: str | Path | None = None,
    *,
    level: float = 0.95,
    tolerance: float = DEFAULT_TOLERANCE,
    think_time_ms: float | None = None,
) -> Report:
    """Analyse `results_dir` and write report.html, report.md and tables/*.csv."""
    started = time.perf_counter()
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be between 0 and 1, got {level}")
    results_dir = Path(results_dir)
    out = Path(out_dir) if out_dir is not None else results_dir / "report"
    results = load(results_dir)
    summary = summarize(results, level)

    notes = list(summary.notes)
    sections = [
        overview_section(results, summary),
        configurations_section(summary),
        max_throughput_section(summary),
        throughput_section(summary),
        proxies_section(summary),
        breakdown_section(summary),
        time_distributions_section(summary),
        percentiles_section(summary),
        keys_section(summary),
        mixed_section(summary),
        resources_section(summary),
        trace_section(summary),
        interactive_section(summary, tolerance, think_time_ms),
        relative_section(summary),
        factorial_section(summary),
        factorial_models_section(summary),
        queueing_models_section(summary, notes),
        mix_models_section(summary),
        pools_per_server_section(summary),
        predictions_section(summary, notes),
        checks_section(results, summary, tolerance),
    ]
    sections = [s for s in sections if s is not None and (s.items or s.text)]
    title = f"memrelay-lab report: {results.manifest.get('experiment', {}).get('name', results_dir.name)}"

    out.mkdir(parents=True, exist_ok=True)
    (out / "tables").mkdir(exist_ok=True)
    (out / "figures").mkdir(exist_ok=True)
    tables, figures = {}, {}
    for section in sections:
        for item in section.items:
            if isinstance(item, Table):
                path = out / "tables" / f"{item.name}.csv"
                (item.csv if item.csv is not None else item.frame).to_csv(path, index=item.index)
                tables[item.name] = path
            else:
                path = out / "figures" / f"{item.name}.png"
                path.write_bytes(item.png)
                figures[item.name] = path
    html_path = out / "report.html"
    html_path.write_text(render_html(title, sections, notes), encoding="utf-8")
    md_path = out / "report.md"
    md_path.write_text(render_markdown(title, sections, notes), encoding="utf-8")
    return Report(
        out_dir=out,
        html=html_path,
        markdown=md_path,
        tables=tables,
        figures=figures,
        sections=tuple(s.title for s in sections),
        notes=tuple(notes),
        elapsed_s=time.perf_counter() - started,
    )
