"""`pickle bench transports`: seed 000's comparison of each library's fast path (P2P) with its host-staged path (SHM),
every configuration in its own process set, --runs times.

Per operation (p2p, allreduce): the seed's table (configuration | run 1 | run 2 | ... | mean at the largest size |
gain), the means per size with the three gains as ratios, and a bar chart of the configurations at the largest size
(bar = mean, dots = the runs)."""
import os

from .. import machine, markdown, plotting
from ..inputs import require
from ..units import number, ratio, size_label, size_words
from .registry import Suite, register

# Colours per configuration key: a library's two paths share a hue, the slow path lighter.
COLOURS = {"nccl-p2p": "tab:orange", "nccl-shm": "#f5c08a", "pickle-ipc": "tab:blue", "pickle-shm": "#8fbbe0"}
METRIC = {"p2p": "unidirectional bandwidth, ranks 0 -> 1 (GB/s)", "allreduce": "allreduce bus bandwidth (GB/s)"}


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check(bench):
    operations = require(bench, bench.data, "operations", list, "the file")
    for i, op in enumerate(operations):
        where = "operations[%d]" % i
        require(bench, op, "op", str, where)
        require(bench, op, "status", str, where)
        for j, config in enumerate(require(bench, op, "configurations", list, where)):
            cwhere = "%s.configurations[%d]" % (where, j)
            for key in ("key", "name", "status"):
                require(bench, config, key, str, cwhere)
            for k, run in enumerate(require(bench, config, "runs", list, cwhere)):
                rwhere = "%s.runs[%d]" % (cwhere, k)
                require(bench, run, "run", int, rwhere)
                require(bench, run, "status", str, rwhere)
                for m, point in enumerate(require(bench, run, "results", list, rwhere)):
                    pwhere = "%s.results[%d]" % (rwhere, m)
                    size = require(bench, point, "bytes", int, pwhere)
                    gbps = require(bench, point, "gbps", (int, float), pwhere)
                    if size <= 0 or gbps < 0:
                        raise bench.fail("%s: bytes %r, gbps %r; sizes are positive and bandwidths not negative"
                                         % (pwhere, size, gbps))
            for m, mean in enumerate(config.get("mean_gbps") or []):
                require(bench, mean, "bytes", int, "%s.mean_gbps[%d]" % (cwhere, m))
                require(bench, mean, "mean", (int, float), "%s.mean_gbps[%d]" % (cwhere, m))
        for j, gain in enumerate(op.get("gains") or []):
            gwhere = "%s.gains[%d]" % (where, j)
            for key in ("fast", "slow", "label"):
                require(bench, gain, key, str, gwhere)
            if gain.get("largest") is not None and not _number(gain["largest"]):
                raise bench.fail("%s.largest is not a number" % gwhere)
    if not isinstance(bench.data.get("options", {}), dict):
        raise bench.fail("'options' is not an object")


def _runs_count(bench):
    runs = (bench.data.get("options") or {}).get("runs")
    if isinstance(runs, int) and runs > 0:
        return runs
    return max([len(c["runs"]) for op in bench.data["operations"] for c in op["configurations"]] or [1])


def _value(run, size):
    for point in run["results"]:
        if point["bytes"] == size:
            return point["gbps"]
    return None


def _mean(config, size):
    for m in config.get("mean_gbps") or []:
        if m["bytes"] == size:
            return m["mean"]
    return None


def _name_of(op, key):
    for config in op["configurations"]:
        if config["key"] == key:
            return config["name"]
    return key


def _gain_words(value):
    return "%+.1f%% (%.2fx)" % ((value - 1) * 100, value)


def _seed_table(op, size, runs):
    mean_title = "mean GB/s (%s)" % size_words(size) if size else "mean GB/s"
    header = ["configuration"] + ["run %d" % r for r in range(1, runs + 1)] + [mean_title, "gain"]
    gains = {g["fast"]: g for g in op.get("gains") or []}
    rows = []
    for config in op["configurations"]:
        row = [config["name"]]
        if config["status"] == "skipped":
            rows.append(row + ["skipped: %s" % (config.get("detail") or "unavailable")] + ["—"] * (runs + 1))
            continue
        for r in range(1, runs + 1):
            run = next((x for x in config["runs"] if x["run"] == r), None)
            if run is None:
                row.append("—")
            elif run["status"] != "ok":
                row.append("FAILED")
            else:
                row.append(number(_value(run, size)))
        row.append(number(_mean(config, size)) if config["status"] == "ok" else "—")
        gain = gains.get(config["key"])
        if gain is None:
            row.append("")
        elif gain.get("largest") is None:
            row.append("— (%s did not measure)" % _name_of(op, gain["slow"]))
        else:
            row.append("%s over %s" % (_gain_words(gain["largest"]), _name_of(op, gain["slow"])))
        rows.append(row)
    return markdown.table(header, rows)


def _sizes(op):
    return sorted({p["bytes"] for c in op["configurations"] for r in c["runs"] for p in r["results"]})


def _size_table(op):
    configs = op["configurations"]
    gains = op.get("gains") or []
    header = ["Size"] + [c["key"] for c in configs] + [g["label"] for g in gains]
    rows = []
    for size in _sizes(op):
        row = [size_words(size)]
        for c in configs:
            mean = _mean(c, size)
            if c["status"] == "skipped":
                row.append("n/a")
            elif mean is None:
                row.append("FAILED" if c["status"] == "failed" else "—")
            else:
                row.append(number(mean) + ("*" if c["status"] == "failed" else ""))
        for g in gains:
            value = next((p.get("ratio") for p in g.get("per_size") or [] if p.get("bytes") == size), None)
            row.append(ratio(value))
        rows.append(row)
    return markdown.table(header, rows)


def _bar_chart(bench, op, size, out):
    """Bandwidth per configuration at one size: bar = mean over the runs, dots = each run."""
    configs = op["configurations"]
    fig, ax = plotting.figure()
    top = 0.0
    labelled = False
    for i, c in enumerate(configs):
        colour = COLOURS.get(c["key"], plotting.style(c["key"], i)[0])
        mean = _mean(c, size) if c["status"] == "ok" else None
        values = [_value(r, size) for r in c["runs"] if r["status"] == "ok"]
        values = [v for v in values if v is not None]
        if mean is not None:
            ax.bar(i, mean, width=0.6, color=colour, edgecolor="black", linewidth=0.5)
            # The label goes above the highest run, so that no dot hides it.
            ax.annotate(number(mean), (i, max([mean] + values)), xytext=(0, 5), textcoords="offset points",
                        ha="center", va="bottom", fontsize=8)
            top = max([top, mean] + values)
        if values:
            ax.plot([i] * len(values), values, linestyle="none", marker="o", markersize=4, color="black",
                    label=None if labelled else "one run")
            labelled = True
        if mean is None:
            ax.annotate(c["status"], (i, 0), xytext=(0, 4), textcoords="offset points", ha="center", va="bottom",
                        fontsize=8, color="gray")
    ax.set_xlim(-0.6, len(configs) - 0.4)
    ax.set_xticks(range(len(configs)))
    ax.set_xticklabels([c["name"].replace(" (", "\n(") for c in configs], fontsize=7)
    ax.set_ylabel(METRIC.get(op["op"], "GB/s"))
    ax.set_ylim(0, max(1e-9, top) * 1.25)
    plotting.title(ax, "%s: %s per configuration at %s" % (machine.short(bench.data), op["op"], size_label(size)),
                   "%s (%s); bar = mean of %d runs, dots = each run" % (os.path.basename(bench.path),
                                                                       machine.date(bench.data), _runs_count(bench)))
    if labelled:
        ax.legend(fontsize=8, loc="upper right")
    path, link = out.plot_path(bench.stem, op["op"], "configurations")
    plotting.save(fig, path)
    return link


def _method(bench):
    o = bench.data.get("options") or {}
    parts = ["%s runs per configuration, each in its own process set, configurations interleaved" % o.get("runs", "?")]
    if "min_bytes" in o and "max_bytes" in o:
        parts.append("sizes %s to %s, factor %s" % (size_words(o["min_bytes"]), size_words(o["max_bytes"]),
                                                   o.get("factor", "?")))
    if o.get("memory"):
        parts.append("%s memory" % o["memory"])
    if o.get("world_size"):
        parts.append("%s ranks" % o["world_size"])
    parts.append("each run's value is the median of its repeats; GB/s = 1e9 bytes/s")
    return "; ".join(parts)


def _failures(op):
    lines = []
    for c in op["configurations"]:
        for run in c["runs"]:
            if run["status"] == "failed":
                lines.append("- %s, run %d: FAILED: %s" % (c["name"], run["run"], run.get("detail") or "?"))
    return lines


def render(bench, out):
    lines = ["**Method**: %s (docs/bench.md)." % _method(bench)]
    lines += markdown.notes(bench.data)
    runs = _runs_count(bench)
    for op in bench.data["operations"]:
        lines += ["", "### %s: %s" % (op["op"], METRIC.get(op["op"], "GB/s")), ""]
        if op["status"] == "skipped":
            lines.append("Not run: %s." % (op.get("detail") or "skipped"))
            continue
        largest = op.get("largest_bytes")
        if not isinstance(largest, int) or largest <= 0:
            # The same fallback as the command's table: the largest size any run reached, without means or gains.
            largest = None
            lines += ["No size was measured by every run of every configuration that ran: no mean, no gain.", ""]
        sizes = _sizes(op)
        lines += _seed_table(op, largest or (sizes[-1] if sizes else None), runs)
        lines += ["", "Per size, mean over the runs (* = from the runs before a failure); gains as ratios:", ""]
        lines += _size_table(op)
        failures = _failures(op)
        if failures:
            lines += [""] + failures
        if largest:
            lines += ["", markdown.image("%s per configuration" % op["op"], _bar_chart(bench, op, largest, out))]
    return lines


register(Suite("transports", check, render))
