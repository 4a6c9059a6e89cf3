"""A report's sections as self-contained HTML and as Markdown.

``report.html`` inlines its figures (base64 PNG) and styles and needs no network. It fits the
page: every table is in its own horizontally scrolling box (on screen), its headers wrap, and
printed, every cell wraps instead of running off the paper (`_CSS`). A small
inline script sets ``data-images-loaded="N/M"`` on <body> once the page has loaded (N
images decoded of M), which the browser test reads.
"""

from __future__ import annotations

import base64
import html
import re

import numpy as np

from ._document import Figure, Section, Table
from ._format import NO_INTERVAL, WIDE_MARK, format_number, unit_of

__all__ = ["render_html", "render_markdown", "slug"]


FLAG_COLUMNS = ("consistent", "stable")
FLAG = "NO"
STABLE_ROW = "Stable"  # the M/M tables' 0/1 row of whether ρ < 1


def _cell(value, column: object = None, row_label: object = None, table: Table | None = None) -> str:
    """One table cell: flags as yes/NO, numbers by the unit of their column (or of their row,
    in tables with metrics as rows, or the table's own unit)."""
    if isinstance(value, (bool, np.bool_)) and column in FLAG_COLUMNS:
        return "yes" if value else FLAG
    if str(row_label).startswith(STABLE_ROW) and value in (0.0, 1.0):
        return "yes" if value else FLAG
    if table is not None and row_label is not None and str(row_label) in table.row_units:
        return format_number(value, unit=table.row_units[str(row_label)])
    if table is not None and column in table.units:
        return format_number(value, unit=table.units[column])
    if unit_of(column) != "plain":
        return format_number(value, column)
    if row_label is not None and unit_of(row_label) != "plain":
        return format_number(value, row_label)
    return format_number(value, column, unit=table.unit if table is not None else None)


def _rows(item: Table) -> tuple[list[str], list[list[str]]]:
    frame, index = item.frame, item.index
    header = ([str(frame.index.name or "")] if index else []) + [str(c) for c in frame.columns]
    rows = []
    # Column by column, so a row of mixed columns keeps its integers (iterrows makes them floats).
    columns = [frame[c].tolist() for c in frame.columns]
    for position, label in enumerate(frame.index):
        values = [column[position] for column in columns]
        row_label = label if index else dict(zip(frame.columns, values)).get("metric")  # long tables: a column
        cells = [_cell(v, c, row_label, item) for c, v in zip(frame.columns, values)]
        rows.append(([str(label)] if index else []) + cells)
    return header, rows


_CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; padding-bottom: .2em; }
.scroll { overflow-x: auto; max-width: 100%; margin: 1em 0; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: right; white-space: nowrap; }
th { white-space: normal; overflow-wrap: anywhere; min-width: 4em; vertical-align: bottom; }
p, li, caption { overflow-wrap: anywhere; }
@media print {
  body { max-width: none; margin: 0; }
  .scroll { overflow: visible; }
  table { font-size: 8px; width: 100%; table-layout: auto; }
  th, td { white-space: normal; overflow-wrap: anywhere; padding: 1px 3px; }
}
th { background: #f2f2f2; } td:first-child, th:first-child { text-align: left; }
td.flag { background: #fdd; font-weight: bold; }
td.wide { background: #fff3cd; }
caption { caption-side: top; text-align: left; font-weight: bold; padding: 4px 0; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .9em; color: #555; }
.notes { background: #fffbe6; border: 1px solid #f0e0a0; padding: .5em 1em; }
code { background: #f4f4f4; padding: 0 .2em; }
"""

_IMAGES_LOADED_SCRIPT = """
window.addEventListener('load', function () {
  var images = document.images, loaded = 0;
  for (var i = 0; i < images.length; i++) {
    if (images[i].complete && images[i].naturalWidth > 0) loaded++;
  }
  document.body.setAttribute('data-images-loaded', loaded + '/' + images.length);
});
"""


def _inline_markup(text: str) -> str:
    escaped = html.escape(text)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def render_html(title: str, sections: list[Section], notes: list[str]) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>",
        '<body data-images-loaded="pending">',
        f"<h1>{html.escape(title)}</h1>",
        "<nav><ol>"
        + "".join(f'<li><a href="#{slug(s.title)}">{html.escape(s.title)}</a></li>' for s in sections)
        + "</ol></nav>",
    ]
    if notes:
        parts.append('<div class="notes"><strong>Notes</strong><ul>')
        parts += [f"<li>{_inline_markup(n)}</li>" for n in notes]
        parts.append("</ul></div>")
    for section in sections:
        parts.append(f'<section id="{slug(section.title)}"><h2>{html.escape(section.title)}</h2>')
        parts += [f"<p>{_inline_markup(paragraph)}</p>" for paragraph in section.text]
        for item in section.items:
            if isinstance(item, Figure):
                data = base64.b64encode(item.png).decode("ascii")
                parts.append(
                    f'<figure><img alt="{html.escape(item.caption)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{html.escape(item.caption)}</figcaption></figure>"
                )
            elif not item.frame.empty:
                parts.append(_html_table(item))
            else:
                parts.append(f"<p>{html.escape(item.caption)}: <code>tables/{item.name}.csv</code></p>")
        parts.append("</section>")
    parts.append(f"<script>{_IMAGES_LOADED_SCRIPT}</script>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _html_table(item: Table) -> str:
    header, rows = _rows(item)
    out = [f'<div class="scroll"><table><caption>{html.escape(item.caption)} '
           f'<small>(<code>tables/{item.name}.csv</code>)</small></caption>']
    out.append("<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr></thead><tbody>")
    flagged = {i for i, name in enumerate(header) if name in FLAG_COLUMNS}
    for row in rows:
        cells = "".join(
            f'<td class="flag">{html.escape(c)}</td>' if i in flagged and c == FLAG
            else f'<td class="wide">{html.escape(c)}</td>' if WIDE_MARK in c or NO_INTERVAL in c
            else f"<td>{html.escape(c)}</td>"
            for i, c in enumerate(row)
        )
        out.append(f"<tr>{cells}</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def render_markdown(title: str, sections: list[Section], notes: list[str]) -> str:
    lines = [f"# {title}", ""]
    if notes:
        lines += ["**Notes**", ""] + [f"- {n}" for n in notes] + [""]
    for section in sections:
        lines += [f"## {section.title}", ""]
        for paragraph in section.text:
            lines += [paragraph, ""]
        for item in section.items:
            if isinstance(item, Figure):
                lines += [f"![{item.caption}](figures/{item.name}.png)", ""]
            elif item.frame.empty:
                lines += [f"{item.caption}: `tables/{item.name}.csv`", ""]
            else:
                header, rows = _rows(item)
                lines += [f"**{item.caption}** (`tables/{item.name}.csv`)", ""]
                lines.append("| " + " | ".join(_md_escape(h) for h in header) + " |")
                lines.append("|" + "|".join("---" for _ in header) + "|")
                lines += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows]
                lines.append("")
    return "\n".join(lines)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
