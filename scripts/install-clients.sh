#!/usr/bin/env bash
# Builds the client matrix of tests/clients (see tests/clients/README.md) from pinned
# dependencies: the Go program (go.mod/go.sum, go build), the Java one (pom.xml with exact
# versions, mvn package copying the jars into target/lib), the Node one (npm ci from
# package-lock.json) and pylibmc into lab/.venv (tests/clients/requirements.lock; its wheel carries its
# own libmemcached 1.0.16). Idempotent and cheap when
# nothing changed: each part is redone only when its inputs are newer than what it built.
# Called by scripts/install-deps.sh; prints how long each part took.
set -euo pipefail
cd "$(dirname "$0")/../tests/clients"
venv=../../lab/.venv

timed() { # timed LABEL COMMAND...: runs it, then says how long it took
  local label=$1 start=$SECONDS; shift
  echo "deps: clients: $label"
  "$@"
  echo "deps: clients: $label took $((SECONDS - start)) s"
}

newer() { # newer TARGET SOURCES...: true when TARGET is missing or older than a source
  local target=$1; shift
  [ -e "$target" ] || return 0
  [ -n "$(find "$@" -newer "$target" -print -quit)" ]
}

if newer go/bin/gomemcache-client go/main.go go/go.mod go/go.sum; then
  timed "go build (gomemcache)" bash -c 'cd go && go build -mod=readonly -o bin/gomemcache-client .'
fi

if newer java/target/.built java/pom.xml java/src; then
  # Maven's output only when it fails (its quiet mode still prints colour codes).
  timed "mvn package (spymemcached, xmemcached)" bash -c \
    'cd java && { mvn -B -q -ntp package >target.log 2>&1 || { cat target.log; exit 1; }; } && touch target/.built'
fi

if newer node/node_modules/.package-lock.json node/package.json node/package-lock.json; then
  timed "npm ci (memcached, memjs)" bash -c 'cd node && npm ci --no-audit --no-fund --no-update-notifier --loglevel=error'
fi

if ! cmp -s requirements.lock "$venv/.installed-tests-clients-lock"; then
  timed "pip install pylibmc" "$venv/bin/pip" install -q --disable-pip-version-check -r requirements.lock
  cp requirements.lock "$venv/.installed-tests-clients-lock"
fi
