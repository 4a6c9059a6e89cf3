"""The documentation stays true to the repository and to the binaries.

- Every relative link in the repository's markdown (README.md, docs/, the crates', experiments'
  and tests' READMEs; not lab/.venv, target, node_modules, results) names a file that exists, and
  an anchor (`file.md#section`, `#section`) names a heading of that file, slugged as GitHub
  slugs headings, or an explicit `<a id=…>`/`<a name=…>`.
- docs/reference/memrelay-options.md and memrelay-bench-options.md are what
  scripts/gen_option_docs.py makes of the built binaries' `--help` today (binaries from
  $MEMRELAY_BIN_DIR, as the rest of tests/python). When an option changes, `make docs`
  regenerates them.

Each check is also shown failing: on a doctored copy of the README's links, and on a `--help`
with one word changed.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SKIP_DIRS = {".git", "target", ".venv", "venv", "node_modules", "results", "__pycache__", ".pytest_cache"}

_spec = importlib.util.spec_from_file_location("gen_option_docs", REPO / "scripts" / "gen_option_docs.py")
gen = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = gen  # dataclasses look their module up
_spec.loader.exec_module(gen)


# --- links and anchors ------------------------------------------------------------------------


def markdown_files(root: Path) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        found += [Path(dirpath) / f for f in sorted(filenames) if f.endswith(".md")]
    return found


_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_LINK = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ANCHOR = re.compile(r"<a\s+(?:[^>]*\s)?(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, with inline code spans blanked."""
    out, fence = [], None
    for number, line in enumerate(text.split("\n"), 1):
        m = _FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1) == fence:
                fence = None
            continue
        if fence is None:
            out.append((number, _CODE_SPAN.sub(lambda c: " " * len(c.group(0)), line)))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text (no markup) in lower case, punctuation dropped,
    spaces made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"(?<!\w)_+|_+(?!\w)", "", text)  # _emphasis_, not snake_case
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    found, seen = set(), {}
    fence = None
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if m:
            fence = m.group(1) if fence is None else (None if m.group(1) == fence else fence)
            continue
        if fence is not None:
            continue
        found.update(_HTML_ANCHOR.findall(line))
        h = _HEADING.match(line)
        if h:
            base = slug(h.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def check_links(path: Path, text: str, root: Path = REPO) -> list[str]:
    """The broken relative links of one markdown file (`path`, whose content is `text`)."""
    problems = []
    own_anchors = None
    for number, line in prose_lines(text):
        targets = _INLINE_LINK.findall(line)
        ref = _REF_LINK.match(line)
        if ref:
            targets.append(ref.group(1))
        for link in targets:
            if re.match(r"^[a-z][a-z0-9+.-]*:", link, re.IGNORECASE) or link.startswith("//"):
                continue  # http:, https:, mailto:
            where = f"{path.relative_to(root)}:{number}: ({link})"
            file_part, _, anchor = link.partition("#")
            if file_part:
                target = (path.parent / file_part).resolve()
                if not target.exists():
                    problems.append(f"{where}: no file {file_part}")
                    continue
                try:
                    target.relative_to(root.resolve())
                except ValueError:
                    problems.append(f"{where}: {file_part} is outside the repository")
                    continue
            else:
                target = path
            if anchor:
                if target.is_dir() or target.suffix != ".md":
                    problems.append(f"{where}: an anchor into {file_part}, which is not a markdown file")
                    continue
                if target == path:
                    if own_anchors is None:
                        own_anchors = anchors(text)
                    names = own_anchors
                else:
                    names = anchors(target.read_text())
                if anchor not in names:
                    problems.append(f"{where}: no heading #{anchor} in {target.relative_to(root.resolve())}")
    return problems


def test_every_relative_link_and_anchor_resolves():
    files = markdown_files(REPO)
    assert REPO / "README.md" in files and REPO / "docs" / "README.md" in files
    problems = [p for f in files for p in check_links(f, f.read_text())]
    assert not problems, "broken links in the documentation:\n" + "\n".join(problems)


def test_the_link_check_fails_on_a_doctored_link():
    readme = REPO / "README.md"
    text = readme.read_text()
    assert "](docs/operating.md)" in text and "](docs/reference/memrelay-options.md)" in text
    assert check_links(readme, text) == []
    doctored = (
        text.replace("](docs/operating.md)", "](docs/operatin.md)", 1)
        .replace("](docs/reference/memrelay-options.md)", "](docs/reference/memrelay-options.md#no-such-option)", 1)
        + "\n[a section that is not there](#nowhere) and [one that is](#quick-start)\n"
    )
    problems = check_links(readme, doctored)
    assert len(problems) == 3, problems
    assert "no file docs/operatin.md" in problems[0]
    assert "no heading #no-such-option" in problems[1]
    assert "no heading #nowhere" in problems[2]
    # an anchor into another file, moved there from the README: right, then wrong
    index = REPO / "docs" / "README.md"
    good = "[policies](operating.md#write-policies-and-replica-repair)\n"
    assert check_links(index, good) == []
    assert len(check_links(index, good.replace("operating.md#", "lab.md#"))) == 1


def test_slugs_are_githubs():
    assert slug("Prometheus metrics (`--metrics-listen HOST:PORT`)") == "prometheus-metrics---metrics-listen-hostport"
    assert slug("Machines: `[hosts]` and `[roles]`") == "machines-hosts-and-roles"
    assert slug("Live reload (SIGHUP)") == "live-reload-sighup"
    assert slug("`memrelay-bench` options") == "memrelay-bench-options"
    assert slug("Worker threads (seeds 001 and 002)") == "worker-threads-seeds-001-and-002"
    assert slug("what `server_timeout_ms` does") == "what-server_timeout_ms-does"


# --- the option reference ---------------------------------------------------------------------


def bin_dir() -> Path:
    return Path(os.environ.get("MEMRELAY_BIN_DIR", REPO / "target" / "release"))


def binary(program: str) -> Path:
    path = bin_dir() / program
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not found: build it (make build) or set MEMRELAY_BIN_DIR", pytrace=False)
    return path


@pytest.mark.parametrize("program", list(gen.PROGRAMS))
def test_option_reference_is_what_the_binary_prints(program):
    expected = gen.render(program, gen.run_help(binary(program)))
    path = gen.target(program)
    actual = path.read_text() if path.exists() else ""
    if actual != expected:
        import difflib

        diff = "".join(
            difflib.unified_diff(actual.splitlines(True), expected.splitlines(True), str(path), f"{program} --help")
        )
        pytest.fail(
            f"{path.relative_to(REPO)} differs from `{program} --help`; regenerate it with `make docs`"
            f" (or scripts/gen_option_docs.py --bin-dir DIR):\n{diff}",
            pytrace=False,
        )


def test_every_option_of_the_help_is_in_the_reference():
    """The parser drops nothing: every `--long` option the help names has its row."""
    for program in gen.PROGRAMS:
        help_text = gen.run_help(binary(program))
        reference = gen.target(program).read_text()
        rows = [line for line in reference.split("\n") if line.startswith("| `")]
        for option in set(re.findall(r"^ {1,6}(?:-\w, )?(--[\w-]+)", help_text, re.MULTILINE)):
            assert any(f"{option} " in row or f"{option}`" in row for row in rows), f"{program}: {option}"


def test_the_check_fails_when_the_help_changes(tmp_path):
    """`gen_option_docs.py --check` (and so the test above) fails on a help text that changed."""
    for program in gen.PROGRAMS:
        real = binary(program)
        fake = tmp_path / program
        fake.write_text(f"#!/bin/sh\n'{real}' \"$@\" | sed 's/--server/--servers/g'\n")
        fake.chmod(0o755)
    script = REPO / "scripts" / "gen_option_docs.py"
    ok = subprocess.run([sys.executable, script, "--check", "--bin-dir", bin_dir()], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    stale = subprocess.run([sys.executable, script, "--check", "--bin-dir", tmp_path], capture_output=True, text=True)
    assert stale.returncode == 1, stale.stdout + stale.stderr
    assert "regenerate with `make docs`" in stale.stderr
    assert "+| `--servers" in stale.stdout
