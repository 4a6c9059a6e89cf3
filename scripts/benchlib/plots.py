"""The memory bench's figures (scripts/bench_memory.py): CPU per request against value size and
against keys per get, RSS per idle connection against the number of connections; every target in
each, one PNG each (this build's; an earlier build's NAME@baseline targets are left out). matplotlib
(the lab's environment, `make deps`) with its Agg backend."""

from __future__ import annotations

from pathlib import Path

from . import beforeafter, human

STYLE = {"memcached": ("black", "memcached direct"), "twemproxy": ("tab:orange", "twemproxy"),
         "memcached-proxy": ("tab:green", "memcached's proxy")}


def style(target: str) -> tuple[str | None, str]:
    if target in STYLE:
        return STYLE[target]
    return ("tab:blue" if "evented" in target else "tab:purple" if "pool" in target else None), target


def draw(result: dict, folder: Path) -> list[Path]:
    """Writes the figures the result has data for into `folder`; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    folder.mkdir(parents=True, exist_ok=True)
    written = []

    def figure(name: str, title: str, xlabel: str, ylabel: str, series: dict, x_format, y_format, logx=True):
        if not series:
            return
        fig, ax = plt.subplots(figsize=(7, 4.2), dpi=100)
        for (target, dashed), points in sorted(series.items()):
            points = sorted(points)
            color, label = style(target)
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", color=color,
                    linestyle="--" if dashed else "-", label=label + (" (set)" if dashed else ""))
        if logx:
            ax.set_xscale("log")
        ax.set_yscale("log")
        xs = sorted({p[0] for points in series.values() for p in points})
        ax.set_xticks(xs)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: x_format(v)))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: y_format(v)))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize="small")
        fig.tight_layout()
        path = folder / name
        fig.savefig(path)
        plt.close(fig)
        written.append(path)

    def plain(v: float) -> str:
        return f"{v:,.0f}" if v >= 10 else f"{v:,.1f}".removesuffix(".0") if v >= 1 else f"{v:.2g}"

    by_size, by_keys, by_connections = {}, {}, {}
    for row in result.get("cpu", []):
        for target, cell in row["targets"].items():
            if "cannot" in cell or not cell.get("cpu_us_per_request") or beforeafter.is_baseline(target):
                continue
            if row["multiget"] == 1:
                by_size.setdefault((target, row["op"] == "set"), []).append((row["data_size"], cell["cpu_us_per_request"]))
            if row["op"] == "get" and row["data_size"] == 1024:
                by_keys.setdefault((target, False), []).append((row["multiget"], cell["cpu_us_per_request"]))
    for row in result.get("idle", []):
        for target, cell in row["targets"].items():
            if "cannot" not in cell and cell.get("bytes_per_connection") is not None and not beforeafter.is_baseline(target):
                by_connections.setdefault((target, False), []).append((row["connections"], cell["bytes_per_connection"] / 1024))
    figure("cpu-vs-value-size.png", "CPU per request against value size (get solid, set dashed)", "value size",
           "CPU µs per request (the target's user + system)", by_size, human.size, plain)
    figure("cpu-vs-keys-per-get.png", "CPU per request against keys per get (1 KiB values)", "keys per get",
           "CPU µs per request (the target's user + system)", by_keys, plain, plain)
    figure("rss-per-idle-connection.png", "RSS per idle connection (after one get each)", "idle connections",
           "KiB of RSS per connection", by_connections, plain, plain)
    return written
