#!/usr/bin/env bash
# `make test`: every suite in order, each stage timed; the stage times are printed at the end,
# also when a stage fails (the first failure stops the run, as make would). One build profile
# serves every suite: cargo's `release-tests` (release without LTO), whose binaries the Python
# suites run too ($MEMRELAY_BIN_DIR), so nothing is built twice.
set -uo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
python=lab/.venv/bin/python
export MEMRELAY_BIN_DIR="$PWD/target/release-tests"
# The report test opens report.html in a real headless browser: the tests install Debian's chromium.
export WITH_CHROMIUM=1

times=()
stage() {
  local name=$1 start=$SECONDS rc
  shift
  echo "== make test: $name"
  "$@"
  rc=$?
  times+=("$(printf '%-8s %5d s  %s' "$name" $((SECONDS - start)) "$([ "$rc" = 0 ] && echo ok || echo "FAILED (exit $rc)")")")
  return "$rc"
}
report() {
  local rc=$?
  echo
  echo "make test: stage times (total $SECONDS s)"
  printf '  %s\n' "${times[@]}"
  exit "$rc"
}
trap report EXIT

stage deps scripts/install-deps.sh || exit
stage lint bash -c "$CARGO fmt --all --check && $CARGO clippy --release --workspace --all-targets -- -D warnings" || exit
stage build "$CARGO" build --profile release-tests --workspace --bins || exit
stage rust "$CARGO" test --profile release-tests --workspace || exit
stage lab "$python" -m pytest lab/tests -q -rs --durations=12 || exit
stage python "$python" -m pytest tests/python -q || exit
stage clients "$python" -m pytest tests/clients -q -rs --durations=5 || exit
stage bench "$python" -m pytest tests/bench -q -rs || exit
