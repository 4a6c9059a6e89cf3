"""The report fits the page (issue 33): every table sits in a box that scrolls sideways on a
screen, headers wrap, and printed, every cell wraps. Checked on the HTML of a table far wider
than any page, and failing on a copy whose styles were doctored back to cutting it."""

from __future__ import annotations

import re

import pandas as pd

from memrelay_lab.report._document import Section, Table
from memrelay_lab.report._render import render_html


def layout_problems(page: str) -> list[str]:
    """What would let a wide table run off the page."""
    problems = []
    tables = page.count("<table")
    boxed = len(re.findall(r'<div class="scroll"><table', page))
    if boxed != tables:
        problems.append(f"{tables - boxed} of {tables} tables outside a scroll box")
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    screen, _, printed = style.partition("@media print")
    if not re.search(r"\.scroll\s*\{[^}]*overflow-x:\s*auto", screen):
        problems.append("the scroll box does not scroll")
    if not re.search(r"\bth\s*\{[^}]*white-space:\s*normal", screen):
        problems.append("headers do not wrap")
    if not re.search(r"th, td\s*\{[^}]*white-space:\s*normal", printed):
        problems.append("printed cells do not wrap")
    return problems


def test_a_wide_table_scrolls_on_screen_and_wraps_in_print():
    wide = pd.DataFrame([{f"link from server{i}_ms": 1.234 * i for i in range(40)}])
    page = render_html("wide", [Section("Wide", ["text"], [Table("wide", "A wide table", wide)])], [])
    assert layout_problems(page) == []
    doctored = page.replace("overflow-x: auto", "overflow-x: hidden").replace('<div class="scroll"><table', "<table", 1)
    assert layout_problems(doctored) == ["1 of 1 tables outside a scroll box", "the scroll box does not scroll"]
