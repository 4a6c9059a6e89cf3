"""Finding the line that sets a key in the text of a TOML file (tomllib gives no positions).

Used by `_spec` for its error and warning messages (``FILE:LINE: key: reason``).
"""

from __future__ import annotations

import re

__all__ = ["KeyLocator"]


_KEY_LINE = re.compile(r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*=""")
_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def _split_dotted(text: str) -> tuple[str, ...]:
    parts = re.findall(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""", text)
    return tuple(part.strip("\"'") for part in parts)


class KeyLocator:
    """Finds the line that sets a key by scanning the file text (tomllib gives no positions).

    Tables are paths: () is the top level, ("profile", "quick") is [profile.quick]; the
    blocks of ``combinations`` (inline tables or [[combinations]]) are numbered.
    """

    def __init__(self, text: str):
        self.text = text
        self.lines: dict[tuple[tuple, str], int] = {}  # (table, key) -> first line
        self.blocks: dict[tuple[tuple, int, str], int] = {}  # (table, block, key) -> line
        self.tables: dict[tuple, int] = {}
        self._scan()

    def _scan(self) -> None:
        table: tuple = ()
        array_counts: dict[tuple, int] = {}
        block: int | None = None
        lines = self.text.splitlines()
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line) + 1)
        for number, line in enumerate(lines, start=1):
            header = _HEADER.match(line)
            if header and not _KEY_LINE.match(line):
                path = _split_dotted(header[2])
                if header[1] == "[[":
                    block = array_counts.get(path, 0)
                    array_counts[path] = block + 1
                    self.blocks.setdefault((path[:-1], block, ""), number)
                    table = path
                else:
                    block = None
                    table = path
                self.tables.setdefault(table, number)
                continue
            match = _KEY_LINE.match(line)
            if not match:
                continue
            dotted = _split_dotted(match[1])
            full = table + dotted[:-1]
            key = dotted[-1]
            if block is not None:
                self.blocks.setdefault((table[:-1], block, key), number)
            else:
                self.lines.setdefault((full, key), number)
            if key == "combinations":
                self._scan_inline_blocks(full, offsets[number - 1] + match.end())

    def _scan_inline_blocks(self, table: tuple, start: int) -> None:
        """Numbers the inline tables of ``combinations = [ {...}, {...} ]`` and their keys."""
        text, depth, block, i = self.text, [], -1, start
        while i < len(text):
            char = text[i]
            if char == "#":
                i = text.find("\n", i)
                if i < 0:
                    return
                continue
            if char in "\"'":
                end = text.find(char, i + 1)
                i = len(text) if end < 0 else end + 1
                continue
            if char in "[{":
                depth.append(char)
                if depth == ["[", "{"]:
                    block += 1
            elif char in "]}":
                if depth:
                    depth.pop()
                if not depth:
                    return
            elif depth == ["[", "{"] and (char.isalnum() or char == "_"):
                match = re.match(r"([A-Za-z0-9_-]+)\s*=", text[i:])
                if match:
                    line = text.count("\n", 0, i) + 1
                    self.blocks.setdefault((table, block, match[1]), line)
                    i += match.end()
                    continue
                while i < len(text) and (text[i].isalnum() or text[i] in "_-"):
                    i += 1
                continue
            elif not depth and not char.isspace():
                return
            i += 1

    def find(self, table: tuple, key: str, block: int | None = None) -> int | None:
        """Line of ``key`` in ``table`` (a block of the combinations when ``block`` is given)."""
        if block is not None:
            parent = table[:-1] if table and table[-1] == "combinations" else table
            for candidate in ((parent, block, key), (parent, block, "")):
                if candidate in self.blocks:
                    return self.blocks[candidate]
            return self.lines.get((parent, "combinations"))
        if (table, key) in self.lines:
            return self.lines[(table, key)]
        if table in self.tables:
            return self.tables[table]
        if table:
            return self.find(table[:-1], table[-1])
        return None

    def find_setting(self, key: str, profile: str | None, block: int | None) -> int | None:
        """Line of ``key`` as the experiment uses it: the profile's value wins."""
        tables = ([("profile", profile)] if profile else []) + [()]
        if block is not None:
            for table in tables:
                if (table, "combinations") in self.lines or any(k[0] == table for k in self.blocks):
                    line = self.find((*table, "combinations"), key, block)
                    if line is not None and ((table, block, key) in self.blocks):
                        return line
        for table in tables:
            if (table, key) in self.lines:
                return self.lines[(table, key)]
        return None
