"""Where an experiment ran, for the report's overview: its hosts (roles, cores, processor,
clock offset) and the links between them (round trip, bandwidth), from the manifest's
measured environment (`experiment._environment`).

A run with every role on one host says plainly that all roles shared one machine (its cores
and its loopback interface); hosts that are network namespaces or addresses of the lab's own
machine are said to share its cores.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..analysis import bandwidth_table
from ._document import Table

__all__ = ["machines_overview"]


def machines_overview(manifest: dict[str, Any], value_size: int | None = None) -> tuple[list[str], list[Table]]:
    """Paragraphs and tables on the hosts and links of the run (none for old results); with the
    experiment's value size, what each measured link carries in values per second (seed 004's
    iperf3 table)."""
    environment = manifest.get("environment")
    if not environment:
        machine = manifest.get("machine") or {}
        return ([f"All roles (memcached, memrelay, memrelay-bench) shared one machine ({_cpu(machine)}) and "
                 "talked over its loopback interface; this results folder predates measured hosts and links."],
                [])
    hosts: dict[str, dict] = environment.get("hosts", {})
    links: list[dict] = environment.get("links", [])
    text = []
    if environment.get("single_machine"):
        name, facts = next(iter(hosts.items()))
        text.append(f"All roles (servers, middlewares and clients) shared one machine, {name} ({_cpu(facts)}): "
                    "they competed for its cores and talked over its loopback interface, so no network link "
                    "limited them and client-machine capacity is this machine's.")
        return text, []
    if all(facts.get("processes_visible_to_lab") for facts in hosts.values()):
        text.append(f"The {len(hosts)} hosts are network namespaces or addresses of the lab's own machine "
                    f"({_cpu(next(iter(hosts.values())))}): they have their own addresses and links but share "
                    "its cores.")
    text.append("Clock offsets are each host's clock minus the lab's (NTP's estimate from the round trip with "
                "the smallest delay, within ± half that round trip); every time a host wrote is put on the lab's "
                "clock with it before windows are merged. Links were measured before the first run with "
                "memrelay-bench --link-probe: the smallest and median of 50 one-byte round trips and a 1 s bulk "
                "transfer.")
    host_rows = []
    for name, facts in hosts.items():
        host_rows.append({
            "host": name,
            "address": facts.get("address", "–"),
            "roles": ", ".join(facts.get("roles", [])),
            "cores": facts.get("cores"),
            "processor": facts.get("cpu_model") or "–",
            "clock offset (ms)": f"{1000 * facts.get('clock_offset_s', 0.0):+,.3f}",
            "± (ms)": f"{500 * facts.get('clock_rtt_s', 0.0):,.3f}",
            # The rate the link is shaped to (testbed) or declared (link_mbit): a centre of the models.
            "link rate (Mbit/s)": "–" if facts.get("link_rate_mbit") is None else f"{facts['link_rate_mbit']:,g}",
        })
    link_rows = []
    for link in links:
        row = {"from": link["from"], "to": link["to"], "roles": link.get("roles", "")}
        if link.get("loopback"):
            row.update({"round trip min (ms)": "loopback", "round trip median (ms)": "–", "bandwidth (Mbit/s)": "–"})
        elif "error" in link:
            row.update({"round trip min (ms)": "not measured", "round trip median (ms)": "–",
                        "bandwidth (Mbit/s)": str(link["error"])[:80]})
        else:
            row.update({"round trip min (ms)": f"{link['rtt_min_ms']:,.3f}",
                        "round trip median (ms)": f"{link['rtt_median_ms']:,.3f}",
                        "bandwidth (Mbit/s)": f"{link['mbit_per_s']:,.1f}"})
        link_rows.append(row)
    tables = [Table("hosts", "Hosts: roles, processors and clock offsets against the lab", pd.DataFrame(host_rows))]
    if link_rows:
        tables.append(Table("links", "Links between the roles' hosts (measured before the first run)",
                            pd.DataFrame(link_rows)))
    carried = bandwidth_table(links, value_size)
    if not carried.empty:
        text.append("What each measured link carries, as seed 004's iperf3 table (§1.2) puts it: its rate in MB/s "
                    "and, at the experiment's value size, the values per second it can move, a bound on sets "
                    "sent through it and on get replies coming back (seed 004 §2.1: 24 MB/s of 4,096-byte "
                    "values is about 6,000 requests per second).")
        tables.append(Table("link_bandwidth", f"Link bandwidth in values per second (seed 004's iperf3 table; "
                            f"values of {value_size or '?'} bytes)", carried,
                            units={"Mbit/s": "plain", "MB/s": "plain", "values/s": "rate"}))
    return text, tables


def _cpu(facts: dict[str, Any]) -> str:
    cores = facts.get("cores")
    model = facts.get("cpu_model")
    parts = [f"{cores} cores" if cores else None, model]
    return ", ".join(p for p in parts if p) or "cores unknown"
