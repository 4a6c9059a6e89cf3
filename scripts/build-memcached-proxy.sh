#!/usr/bin/env bash
# Builds memcached's proxy: Debian's memcached source configured with --enable-proxy, which
# Debian's binary package is not. Its Lua and mcmc come vendored in the source.
#
# The result is cached outside the repository, keyed by this script's own contents (which pin
# the source's suite and version below), so every checkout and worktree shares one build and a
# change here builds anew:
#     ${XDG_CACHE_HOME:-$HOME/.cache}/memrelay/memcached-proxy/<first 16 hex of sha256 of this file>/memcached
# The lab and `make bench` find it there (lab/memrelay_lab/plumbing/binaries.py, same key), unless
# $MEMCACHED_PROXY names another. Idempotent: a second call only prints the path. The last
# line of output is the binary's path.
#
# The source comes through apt with a private list of source repositories (deb-src), so the
# machine's own apt configuration is left as it was. Needs libevent-dev (installed if missing).
set -euo pipefail

# trixie's source: bookworm's memcached 1.6.18 proxy routes a multi-get whole by its first key
# (a `get a b` through it returns only what a's server has), which later versions fixed by
# splitting it. Debian drops a version from a suite when it publishes the next; then set the
# one `apt-cache showsrc memcached` names for the suite (a new key, so a new build).
suite=trixie
version=1.6.38-1

script="$(readlink -f "$0")"
key="$(sha256sum "$script" | cut -c1-16)"
out="${XDG_CACHE_HOME:-$HOME/.cache}/memrelay/memcached-proxy/$key"
if [ -x "$out/memcached" ]; then
  echo "$out/memcached"
  exit 0
fi
mkdir -p "$(dirname "$out")"
# One build at a time (two test sessions may ask at once); the second finds the first's result.
exec 9>"$(dirname "$out")/.lock"
flock 9
if [ -x "$out/memcached" ]; then
  echo "$out/memcached"
  exit 0
fi
work="$(mktemp -d)"
# Built beside its final place, so that the last step is a rename on one file system.
staging="$(mktemp -d "$(dirname "$out")/.building.XXXXXX")"
trap 'rm -rf "$work" "$staging"' EXIT

SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
if ! dpkg -s libevent-dev >/dev/null 2>&1; then
  echo "memcached-proxy: installing libevent-dev from Debian's packages" >&2
  $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends libevent-dev >/dev/null
fi

# The first Debian mirror the machine's own (uncommented) sources name.
mirror="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
  | grep -E '^[[:space:]]*(deb|URIs:)' | grep -oE 'https?://[^ ]+' | grep -v security | head -1 || true)"
mirror="${mirror:-http://deb.debian.org/debian}"
echo "deb-src $mirror $suite main" > "$work/sources.list"
mkdir -p "$work/state/lists/partial" "$work/cache/archives/partial"
apt_private=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
             -o "Dir::State=$work/state" -o "Dir::Cache=$work/cache" -o APT::Sandbox::User=root)
echo "memcached-proxy: fetching memcached $version's source ($suite)" >&2
apt-get "${apt_private[@]}" update -qq
if ! (cd "$work" && apt-get "${apt_private[@]}" source --download-only -qq "memcached=$version" >/dev/null); then
  echo "memcached-proxy: Debian's $suite no longer has memcached $version; set \`version\` in $script" \
       "to the one \`apt-cache showsrc memcached\` names for $suite" >&2
  exit 1
fi
tarball="$(ls "$work"/memcached_*.orig.tar.* | head -1)"
mkdir "$work/src"
tar -xf "$tarball" -C "$work/src" --strip-components=1
echo "memcached-proxy: building $(basename "$tarball") with --enable-proxy" >&2
(cd "$work/src" && ./configure --enable-proxy >"$work/configure.log" 2>&1 \
  || { tail -20 "$work/configure.log" >&2; exit 1; })
(cd "$work/src" && make -C vendor all >"$work/make.log" 2>&1 && make -j"$(nproc)" memcached >>"$work/make.log" 2>&1 \
  || { tail -30 "$work/make.log" >&2; exit 1; })
"$work/src/memcached" -h | grep -q proxy_config || { echo "memcached-proxy: the build has no proxy" >&2; exit 1; }
# Into place whole: a build that stopped halfway leaves no binary behind to be taken.
install -m 0755 "$work/src/memcached" "$staging/memcached"
mv -T "$staging" "$out"
echo "memcached-proxy: built $("$out/memcached" -V)" >&2
echo "$out/memcached"
