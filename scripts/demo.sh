#!/usr/bin/env bash
# `make demo`: a small real experiment end to end (memcached servers, memrelay, memrelay-bench
# clients, repetitions), then the analysis report. Prints where the report is.
set -euo pipefail
cd "$(dirname "$0")/.."
export MEMRELAY_BIN_DIR="$PWD/target/release"
lab=lab/.venv/bin/memrelay-lab
out=results/demo
# A demo always shows a fresh run: move an earlier one aside rather than resuming it.
if [ -d "$out" ]; then
  rm -rf "$out.previous"
  mv "$out" "$out.previous"
fi
"$lab" run experiments/demo.toml --out "$out"
"$lab" report "$out"
echo
echo "demo: raw results in $out/, report in $PWD/$out/report/report.html (and report.md)"
