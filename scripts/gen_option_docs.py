#!/usr/bin/env python3
"""The option reference (docs/reference/*-options.md) from the built binaries' `--help`.

    scripts/gen_option_docs.py [--bin-dir DIR] [--check]      (`make docs` runs it)

The options of memrelay and memrelay-bench are defined once, with clap, in their sources
(crates/memrelay/src/cli.rs, crates/bench/src/config.rs); this script runs each binary with
`--help` and turns what it prints into a markdown table: one row per option with its value,
its default and its help, the help's words unchanged. `--check` writes nothing and exits 1
when a checked-in file differs from what the binary prints now (tests/python/test_docs.py does
the same in `make test`). The binaries come from --bin-dir, else $MEMRELAY_BIN_DIR, else
target/release. Standard library only.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT_DIR = REPO / "docs" / "reference"
# program -> (where its options are defined, the manual page that explains them)
PROGRAMS = {
    "memrelay": ("crates/memrelay/src/cli.rs", "docs/operating.md"),
    "memrelay-bench": ("crates/bench/src/config.rs", "crates/bench/README.md"),
}
REGENERATE = "make docs"


class HelpFormatError(Exception):
    """The help text is not shaped as clap prints it; the generator needs a look."""


@dataclass
class Option:
    flags: str  # `-s, --server`
    value: str  # `<HOST:PORT>`, or "" for a flag
    text: list[str] = field(default_factory=list)  # the help, paragraphs
    default: str = ""
    possible: list[str] = field(default_factory=list)  # `a`, or `a`: what a means
    aliases: str = ""


@dataclass
class Help:
    about: str
    usage: str
    sections: list[tuple[str, list[Option]]]
    after: str


def binary_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    if os.environ.get("MEMRELAY_BIN_DIR"):
        return Path(os.environ["MEMRELAY_BIN_DIR"])
    return REPO / "target" / "release"


def run_help(binary: Path) -> str:
    # A fixed width, so the text does not depend on the terminal (clap wraps at 100 without one).
    env = dict(os.environ, COLUMNS="100", LINES="50", NO_COLOR="1")
    out = subprocess.run([str(binary), "--help"], capture_output=True, text=True, env=env, timeout=30)
    if out.returncode != 0:
        raise HelpFormatError(f"{binary} --help exited {out.returncode}: {out.stderr.strip()}")
    return out.stdout


_SPEC = re.compile(r"^(?P<flags>-[^ <\[]*(?:, --?[^ <\[]+)*)(?: (?P<value>.+?))?$")
_BRACKETS = re.compile(r"\s*\[(default|possible values|aliases|env): ([^\]]*)\]")


def _finish(opt: Option, lines: list[str]) -> None:
    """Split one option's help lines into paragraphs, the possible values and the defaults."""
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        stripped = line.strip()
        if not stripped:
            paragraphs.append([])
        elif stripped.startswith("- ") and paragraphs[-1] and paragraphs[-1][0] == "Possible values:":
            paragraphs[-1].append(stripped)
        else:
            paragraphs[-1].append(stripped)
    for para in paragraphs:
        if not para:
            continue
        if para[0] == "Possible values:":
            for item in para[1:]:
                if not item.startswith("- "):  # a wrapped line of the item before
                    opt.possible[-1] += " " + item
                    continue
                name, _, what = item[2:].partition(": ")
                opt.possible.append(f"`{name}`: {what}" if what else f"`{name}`")
            continue
        text = " ".join(para)
        for kind, value in _BRACKETS.findall(text):
            if kind == "default":
                opt.default = value
            elif kind == "possible values":
                opt.possible.extend(f"`{v.strip()}`" for v in value.split(","))
            elif kind == "aliases":
                opt.aliases = value
        text = _BRACKETS.sub("", text).strip()
        if text:
            opt.text.append(text)


def parse(help_text: str) -> Help:
    """clap's help: the about, `Usage: …`, `Heading:` sections of options, and an after-help."""
    lines = help_text.rstrip("\n").split("\n")
    try:
        u = next(i for i, line in enumerate(lines) if line.startswith("Usage: "))
    except StopIteration:
        raise HelpFormatError("no `Usage:` line") from None
    about = " ".join(line.strip() for line in lines[:u] if line.strip())
    usage = lines[u][len("Usage: ") :]
    i = u + 1
    while i < len(lines) and lines[i].startswith(" "):  # a usage wrapped over lines
        usage += " " + lines[i].strip()
        i += 1
    sections: list[tuple[str, list[Option]]] = []
    after: list[str] = []
    current: Option | None = None
    current_lines: list[str] = []
    for line in lines[i:]:
        if not line.strip():
            if current is not None:
                current_lines.append("")
            elif sections:
                after.append("")
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent == 0 and re.fullmatch(r"[A-Z][A-Za-z ]*:", line) and not after:
            if current is not None:
                _finish(current, current_lines)
            current, current_lines = None, []
            sections.append((line[:-1], []))
            continue
        if indent == 0:  # the after-help
            if current is not None:
                _finish(current, current_lines)
            current, current_lines = None, []
            after.append(line)
            continue
        if not sections:
            raise HelpFormatError(f"an indented line before any section: {line!r}")
        if 1 <= indent <= 6 and line.lstrip().startswith("-"):
            if current is not None:
                _finish(current, current_lines)
            spec, _, rest = line.strip().partition("  ")
            m = _SPEC.match(spec)
            if not m:
                raise HelpFormatError(f"cannot read the option line {line!r}")
            current = Option(flags=m["flags"], value=m["value"] or "")
            current_lines = [rest] if rest.strip() else []
            sections[-1][1].append(current)
            continue
        if current is None:
            raise HelpFormatError(f"a help line outside any option: {line!r}")
        current_lines.append(line)
    if current is not None:
        _finish(current, current_lines)
    if not any(opts for _, opts in sections):
        raise HelpFormatError("no options found")
    return Help(about=about, usage=usage, sections=sections, after=" ".join(a for a in after if a).strip())


def _cell(text: str) -> str:
    """A table cell: `|` escaped (also in code spans, as GitHub's tables want), and outside code
    spans `<` too, so that a `<VALUE>` in the help is not taken for HTML."""
    parts = re.split(r"(`+[^`]*`+)", text)
    parts = [p if p.startswith("`") else p.replace("<", "&lt;") for p in parts]
    return "".join(parts).replace("|", "\\|")


def _code(text: str) -> str:
    return f"`{text}`" if "`" not in text else f"`` {text} ``"


def render(program: str, help_text: str) -> str:
    source, manual = PROGRAMS[program]
    help_ = parse(help_text)
    back = "../" * (len(Path("docs/reference").parts))
    out = [
        f"# `{program}` options",
        "",
        f"<!-- Generated by scripts/gen_option_docs.py from `{program} --help`: do not edit by hand;"
        f" `{REGENERATE}` regenerates it. -->",
        "",
        f"Generated from `{program} --help` (the clap definition in [{source}]({back}{source}))",
        f"by [scripts/gen_option_docs.py]({back}scripts/gen_option_docs.py): `{REGENERATE}` regenerates it",
        "after an option changes, and `make test` fails while it differs from what the built binary",
        f"prints. What the options do, explained: [{manual}]({back}{manual}).",
        "",
    ]
    if help_.about:
        out += [help_.about, ""]
    out += ["```text", f"Usage: {help_.usage}", "```", ""]
    for heading, options in help_.sections:
        if len(help_.sections) > 1 or heading != "Options":
            out += [f"## {heading}", ""]
        out += ["| option | default | meaning |", "|---|---|---|"]
        for opt in options:
            name = _code(f"{opt.flags} {opt.value}".strip())
            meaning = " ".join(opt.text)
            if opt.possible:
                described = any(": " in v for v in opt.possible)
                values = "Values: " + ("; " if described else ", ").join(opt.possible) + "."
                meaning = f"{meaning}{'' if meaning.endswith('.') else '.'} {values}" if meaning else values
            if opt.aliases:
                meaning += f" Also: {_code(opt.aliases)}."
            default = _code(opt.default) if opt.default else ""
            out.append(f"| {_cell(name)} | {_cell(default)} | {_cell(meaning)} |")
        out.append("")
    if help_.after:
        out += [help_.after, ""]
    return "\n".join(out)


def target(program: str) -> Path:
    return OUT_DIR / f"{program}-options.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin-dir", help="where memrelay and memrelay-bench are (default: $MEMRELAY_BIN_DIR or target/release)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is out of date")
    args = parser.parse_args(argv)
    bin_dir = binary_dir(args.bin_dir)
    stale = 0
    for program in PROGRAMS:
        binary = bin_dir / program
        if not os.access(binary, os.X_OK):
            print(f"gen_option_docs: {binary} not found (make build, or --bin-dir DIR)", file=sys.stderr)
            return 2
        try:
            text = render(program, run_help(binary))
        except HelpFormatError as e:
            print(f"gen_option_docs: {program}: {e}", file=sys.stderr)
            return 2
        path = target(program)
        old = path.read_text() if path.exists() else ""
        if args.check:
            if old != text:
                stale += 1
                sys.stdout.writelines(
                    difflib.unified_diff(
                        old.splitlines(True), text.splitlines(True), str(path.relative_to(REPO)), f"{program} --help"
                    )
                )
        elif old != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"gen_option_docs: wrote {path.relative_to(REPO)}")
        else:
            print(f"gen_option_docs: {path.relative_to(REPO)} is up to date")
    if stale:
        print(f"gen_option_docs: {stale} file(s) differ from --help; regenerate with `{REGENERATE}`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
