#!/usr/bin/env bash
# Placeholder until the lab lands: shows replication, round robin and sharding on real servers.
set -euo pipefail
cd "$(dirname "$0")/.."
exec lab/.venv/bin/python scripts/demo_session.py
