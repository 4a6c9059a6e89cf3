#!/usr/bin/env bash
# `make test`: every suite, each stage timed; the stage times are printed at the end, also when a
# stage fails (the first failure stops the run, as make would). One build profile serves every
# suite: cargo's `release-tests` (release without LTO), whose binaries the Python suites run too
# ($MEMRELAY_BIN_DIR), so nothing is built twice.
#
# Independent stages run side by side (docs/testing.md says why each pair is safe):
#   deps | build | proxy   (the build needs nothing deps installs; proxy: memcached's proxy, for
#                           the lab's and bench's tests)
#   rust, python | lab | lint, clients, bench    (three lanes, each in order, once those are done:
#                           the suites wait on servers and timeouts part of the time, so a third
#                           lane fills the cores; clippy's profile is release, the tests'
#                           release-tests: two target folders, locked apart)
# A side-by-side stage writes its output to a log file, printed when the stage ends, in stage
# order. The first failure stops every other stage (SIGINT to its process group, so pytest runs
# its teardown; SIGKILL if it has not ended within STOP_WAIT_S) and fails the run; so does Ctrl-C.
set -uo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
python=lab/.venv/bin/python
export MEMRELAY_BIN_DIR="$PWD/target/release-tests"
# The report test opens report.html in a real headless browser: the tests install Debian's chromium.
export WITH_CHROMIUM=1
STOP_WAIT_S=120 # a stopped lab tears its testbed down (namespaces, sshd) before it exits

# The stages, by name.
run_deps() { scripts/install-deps.sh; }
run_lint() { "$CARGO" fmt --all --check && "$CARGO" clippy --release --workspace --all-targets -- -D warnings; }
run_build() { "$CARGO" build --profile release-tests --workspace --bins; }
# memcached's proxy (cached outside the repository), built here rather than by the first test of
# the lab or the bench that needs it (some 40 s of a lane). Where it cannot be built, this stage
# says so and passes: those tests try again and skip, saying why, as before.
run_proxy() {
  scripts/build-memcached-proxy.sh ||
    echo "proxy: memcached's proxy not built; the lab's and the bench's tests try again and say why if they cannot"
}
# The Rust suites, the lab and the bench run side by side and pick ports themselves: each in its
# own range (the Python and client suites take the kernel's, above 32767).
run_rust() { MEMRELAY_PORTS=10000-19999 "$CARGO" test --profile release-tests --workspace; }
run_lab() { MEMRELAY_PORTS=20000-26383 "$python" -m pytest lab/tests -q -rs --durations=12; }
run_python() { "$python" -m pytest tests/python -q; }
run_clients() { "$python" -m pytest tests/clients -q -rs --durations=5; }
run_bench() { MEMRELAY_PORTS=26384-32767 "$python" -m pytest tests/bench -q -rs; }

logs=$(mktemp -d "${TMPDIR:-/tmp}/memrelay-make-test.XXXXXX")
order=() # the stages started so far, in stage order
declare -A took result
interrupted=0

stage_line() {
  printf '%-8s %5s s  %s' "$1" "${took[$1]:--}" "${result[$1]:-not run}"
}
report() {
  local rc=$?
  [ "$interrupted" = 0 ] || rc=130
  echo
  echo "make test: stage times (total $SECONDS s)"
  local name
  for name in "${order[@]}"; do printf '  %s\n' "$(stage_line "$name")"; done
  rm -rf "$logs"
  exit "$rc"
}
trap report EXIT

# One lane of side_by_side: its stages in order, each into $logs/<stage>.log, then
# $logs/<stage>.done ("<exit status> <seconds> <stopped: 0 or 1>"); ends at the first failure,
# or after the running stage once told to stop (SIGINT or SIGTERM).
lane() {
  local stop=0 name start rc
  trap 'stop=1' INT TERM
  for name; do
    start=$SECONDS
    ("run_$name") >"$logs/$name.log" 2>&1 </dev/null
    rc=$?
    echo "$rc $((SECONDS - start)) $stop" >"$logs/$name.tmp" && mv "$logs/$name.tmp" "$logs/$name.done"
    [ "$rc" = 0 ] && [ "$stop" = 0 ] || exit 1
  done
}

# side_by_side "a b" "c d": the lanes at once, the stages of each in order. The stages' outputs
# are printed in stage order (STAGES), each once it and those before it have ended. Returns
# non-zero when a stage failed or the run was interrupted.
side_by_side() {
  local lanes=("$@") pids=() names=() name pid i failed=0 stop_at=-1 next=0 rc secs stopped running
  for name in "${STAGES[@]}"; do
    [[ " $* " == *" $name "* ]] && names+=("$name")
  done
  order+=("${names[@]}")
  echo "== make test: side by side: $(printf '[%s] ' "${lanes[@]}")(each stage's output follows when it" \
    "ends; to follow one meanwhile: tail -f $logs/<stage>.log)"
  for i in "${lanes[@]}"; do
    # Job control for the fork only: each lane leads its own process group (stopped as a whole)
    # and does not ignore SIGINT, as a script's background jobs otherwise do.
    set -m
    # shellcheck disable=SC2086 # a lane is a list of stage names
    lane $i &
    pids+=($!)
    set +m
  done
  trap 'interrupted=1' INT TERM
  while :; do
    running=0
    [ -n "$(jobs -pr)" ] && running=1 # (the shell's own jobs: no pid reused by another process)
    # The first failure or Ctrl-C: every stage still running is told to stop, killed after STOP_WAIT_S.
    for name in "${names[@]}"; do
      [ -f "$logs/$name.done" ] && read -r rc secs stopped <"$logs/$name.done" && [ "$rc" != 0 ] && failed=1
    done
    if [ "$stop_at" = -1 ] && { [ "$failed" = 1 ] || [ "$interrupted" = 1 ]; } && [ "$running" = 1 ]; then
      stop_at=$SECONDS
      echo "== make test: $([ "$interrupted" = 1 ] && echo interrupted || echo 'a stage failed'):" \
        "stopping the stages still running"
      for pid in "${pids[@]}"; do kill -INT -- "-$pid" 2>/dev/null; done
    elif [ "$stop_at" -ge 0 ] && [ $((SECONDS - stop_at)) -ge "$STOP_WAIT_S" ] && [ "$running" = 1 ]; then
      echo "== make test: stages still running ${STOP_WAIT_S} s after being told to stop: killed"
      for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null; done
      stop_at=$((SECONDS + 86400))
    fi
    # Print each stage that has ended, in order; once no lane runs, also those that never ended.
    while [ "$next" -lt "${#names[@]}" ]; do
      name=${names[$next]}
      if [ -f "$logs/$name.done" ]; then
        read -r rc secs stopped <"$logs/$name.done"
        took[$name]=$secs
        if [ "$rc" = 0 ]; then result[$name]=ok
        elif [ "$stopped" = 1 ]; then result[$name]="stopped (exit $rc)"
        else result[$name]="FAILED (exit $rc)"
        fi
      elif [ "$running" = 0 ] && [ -f "$logs/$name.log" ]; then
        result[$name]=killed failed=1
      elif [ "$running" = 0 ]; then
        next=$((next + 1))
        continue # never started: "not run"
      else
        break
      fi
      echo "== make test: $name (${took[$name]:-?} s, ${result[$name]})"
      cat "$logs/$name.log"
      next=$((next + 1))
    done
    [ "$running" = 0 ] && break
    sleep 1
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  trap on_signal INT TERM
  [ "$interrupted" = 0 ] && [ "$failed" = 0 ]
}

on_signal() {
  interrupted=1
  exit 130
}
trap on_signal INT TERM

STAGES=(deps lint build proxy rust lab python clients bench)
side_by_side deps build proxy || exit
side_by_side "rust python" "lab" "lint clients bench" || exit
