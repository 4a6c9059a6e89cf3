#!/usr/bin/env bash
# Installs what memrelay's build, tests and lab need and this machine lacks: memcached,
# twemproxy (nutcracker), libmemcached-tools and openssh-server from Debian's packages, and the
# lab's Python virtual environment with pinned packages, plus the real Python memcached clients
# that tests/python drives memrelay with, and the client matrix of tests/clients (Go, Java, Node
# programs and pylibmc, by scripts/install-clients.sh). Idempotent: does nothing for what is
# already there.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v memcached >/dev/null 2>&1 || need_apt+=(memcached)
command -v nutcracker >/dev/null 2>&1 || [ -x /usr/sbin/nutcracker ] || need_apt+=(nutcracker)
# libmemcached's conformance suite and tools (memccapable, memcstat, memcping), run by the tests.
command -v memccapable >/dev/null 2>&1 || need_apt+=(libmemcached-tools)
# A real OpenSSH server: the lab's SSH hosts are tested against one (started by the tests, on a free port).
[ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)
if [ "${WITH_CHROMIUM:-0}" = 1 ] && ! command -v chromium >/dev/null 2>&1; then need_apt+=(chromium); fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "deps: installing ${need_apt[*]} from Debian's packages"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
  $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  # Debian starts the packaged services; memrelay's tests and lab start their own on free ports.
  $SUDO systemctl disable --now memcached nutcracker >/dev/null 2>&1 || true
  # Only an sshd this script installed is stopped; a machine's own sshd is left alone.
  if [[ " ${need_apt[*]} " == *" openssh-server "* ]]; then $SUDO systemctl disable --now ssh >/dev/null 2>&1 || true; fi
fi

venv=lab/.venv
if [ ! -x "$venv/bin/python" ] || ! cmp -s lab/requirements.lock "$venv/.installed-lock"; then
  echo "deps: preparing the lab's Python environment in $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r lab/requirements.lock
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -e lab
  cp lab/requirements.lock "$venv/.installed-lock"
fi
# The client libraries of tests/python (pymemcache, meta-memcache), in the same venv.
if ! cmp -s tests/python/requirements.lock "$venv/.installed-clients-lock"; then
  echo "deps: installing the Python memcached clients of tests/python into $venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r tests/python/requirements.lock
  cp tests/python/requirements.lock "$venv/.installed-clients-lock"
fi
# The client matrix of tests/clients: Go, Java, Node programs and pylibmc, from pinned versions.
scripts/install-clients.sh
