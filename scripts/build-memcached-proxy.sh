#!/usr/bin/env bash
# Builds memcached's proxy: Debian's memcached source (trixie's by default, see below)
# configured with --enable-proxy, which Debian's binary package is not. Its Lua and mcmc
# come vendored in the source. The result is target/memcached-proxy/memcached (or
# $MEMCACHED_PROXY_DIR/memcached); the lab and `make bench` take it from there, or from
# $MEMCACHED_PROXY. Idempotent: does nothing when the binary is there.
#
# The source comes through apt with a private list of source repositories (deb-src), so the
# machine's own apt configuration is left as it was. Needs libevent-dev (installed if missing).
set -euo pipefail
cd "$(dirname "$0")/.."

out="${MEMCACHED_PROXY_DIR:-$PWD/target/memcached-proxy}"
if [ -x "$out/memcached" ] && "$out/memcached" -h 2>/dev/null | grep -q proxy_config; then
  echo "memcached-proxy: $out/memcached is there"
  exit 0
fi
mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
if ! dpkg -s libevent-dev >/dev/null 2>&1; then
  echo "memcached-proxy: installing libevent-dev from Debian's packages"
  $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends libevent-dev >/dev/null
fi

# The source of Debian's next release by default: bookworm's memcached 1.6.18 proxy routes a
# multi-get whole by its first key (a `get a b` through it returns only what a's server has),
# which later versions fixed by splitting it; MEMCACHED_SOURCE_SUITE picks another suite.
suite="${MEMCACHED_SOURCE_SUITE:-trixie}"
# The first Debian mirror the machine's own (uncommented) sources name.
mirror="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
  | grep -E '^[[:space:]]*(deb|URIs:)' | grep -oE 'https?://[^ ]+' | grep -v security | head -1 || true)"
mirror="${mirror:-http://deb.debian.org/debian}"
echo "deb-src $mirror $suite main" > "$work/sources.list"
mkdir -p "$work/state/lists/partial" "$work/cache/archives/partial"
apt_private=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
             -o "Dir::State=$work/state" -o "Dir::Cache=$work/cache" -o APT::Sandbox::User=root)
echo "memcached-proxy: fetching memcached's source ($suite)"
apt-get "${apt_private[@]}" update -qq
(cd "$work" && apt-get "${apt_private[@]}" source --download-only -qq memcached >/dev/null)
tarball="$(ls "$work"/memcached_*.orig.tar.* | head -1)"
mkdir "$work/src"
tar -xf "$tarball" -C "$work/src" --strip-components=1
echo "memcached-proxy: building $(basename "$tarball") with --enable-proxy"
(cd "$work/src" && ./configure --enable-proxy >"$work/configure.log" 2>&1 \
  || { tail -20 "$work/configure.log"; exit 1; })
(cd "$work/src" && make -C vendor all >"$work/make.log" 2>&1 && make -j"$(nproc)" memcached >>"$work/make.log" 2>&1 || { tail -30 "$work/make.log"; exit 1; })
install -m 0755 "$work/src/memcached" "$out/memcached"
echo "memcached-proxy: built $out/memcached ($("$out/memcached" -V))"
