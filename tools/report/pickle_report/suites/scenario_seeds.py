"""The two scenarios of `pickle bench scenario` that reproduce seeds 002 and 003 (the others are seed 004's, in
scenario.py): their checks of the file, their tables and their plots.

tp-pp (seed 003): per backend and row, the four configurations' ms per forward pass and the seed's ratios (TP's
communication overhead, TP's scaling efficiency, PP's overhead), and a bar chart of what TP's allreduces add per row.
switchml (seed 002): per backend, SwitchML's summary of the jobs (min, max, median, mean, std dev, goodput), and a
bar chart of the goodput at the median job (log scale: the software switch and the GPUs' paths are 1000x apart)."""
import os

from .. import machine, markdown, plotting
from ..inputs import require
from ..units import number


def check_tp_pp(bench, entry, where):
    require(bench, entry, "model", dict, where)
    rows = require(bench, entry, "rows", list, where)
    for j, row in enumerate(rows):
        at = "%s.rows[%d]" % (where, j)
        require(bench, row, "phase", str, at)
        require(bench, row, "batch", int, at)
        require(bench, row, "tokens", int, at)
        for key in ("tp1_ms", "tp2_compute_ms", "tp2_ms", "pp2_ms", "tp_comm_pct", "tp_efficiency_pct",
                    "pp_overhead_pct"):
            require(bench, row, key, (int, float), at)


def check_switchml(bench, entry, where):
    require(bench, entry, "bytes", int, where)
    require(bench, entry, "jobs", list, where)
    require(bench, entry, "duration_ns", dict, where)
    require(bench, entry, "goodput_gbps", (int, float), where)


def _row_label(row):
    if row["phase"] == "prefill":
        return "prefill %d x %s" % (row["batch"], row.get("seq"))
    return "decode %d" % row["batch"]


def _failed_row(result, header, display):
    """A backend's row of a table with `header` where its run failed: the error, the other cells empty."""
    return [display(result["backend"]), "FAILED: %s" % result["error"]] + [""] * (len(header) - 2)


def tp_pp_tables(bench, results, display):
    header = ["Backend", "Row", "Tokens", "TP=1 ms", "TP=2 compute ms", "TP=2 ms", "TP comm %", "TP eff %", "PP=2 ms",
              "PP %", "#wrong"]
    rows = []
    for r in results:
        if r.get("error") is not None:
            rows.append(_failed_row(r, header, display))
            continue
        for row in r["rows"]:
            rows.append([display(r["backend"]), _row_label(row), str(row["tokens"]), number(row["tp1_ms"]),
                         number(row["tp2_compute_ms"]), number(row["tp2_ms"]), number(row["tp_comm_pct"]),
                         number(row["tp_efficiency_pct"]), number(row["pp2_ms"]), number(row["pp_overhead_pct"]),
                         markdown.count_cell(row.get("wrong"), "N/A")])
    model = next((r["model"] for r in results if r.get("error") is None), None)
    lines = []
    if model:
        lines += ["Model: %s (%s layers, h %s, i %s), the four projections of each layer only; ms per forward pass. "
                  "TP comm %% = TP=2 / TP=2 compute - 1; TP eff %% = TP=1 / (2 x TP=2); PP %% = PP=2 / TP=1 - 1."
                  % (model.get("name"), model.get("layers"), model.get("hidden"), model.get("intermediate")), ""]
    return lines + markdown.table(header, rows)


def tp_pp_plot(bench, results, out, display):
    """Grouped bars: TP's communication overhead (%) per row, a bar per backend; rows of wrong data left out."""
    measured = [r for r in results if r.get("error") is None and r.get("rows")]
    if not measured:
        return []
    labels = [_row_label(row) for row in measured[0]["rows"]]
    fig, ax = plotting.figure()
    width = 0.8 / len(measured)
    for k, r in enumerate(measured):
        colour, _ = plotting.style(r["backend"], k)
        xs, ys, bad = [], [], 0
        for i, row in enumerate(r["rows"][:len(labels)]):
            if markdown.is_wrong(row.get("wrong")):
                bad += 1
                continue
            xs.append(i + (k - (len(measured) - 1) / 2) * width)
            ys.append(row["tp_comm_pct"])
        ax.bar(xs, ys, width, color=colour, label=display(r["backend"]) + plotting.wrong_suffix(bad))
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=20, fontsize=8)
    ax.set_ylabel("TP comm % = TP=2 / TP=2 compute - 1")
    ax.legend(fontsize=8)
    model = measured[0].get("model") or {}
    plotting.title(ax, "%s: tp-pp, %s, what TP=2's allreduces add" % (machine.short(bench.data), model.get("name")),
                   "%s (%s)" % (os.path.basename(bench.path), machine.date(bench.data)))
    path, link = out.plot_path(bench.stem, "tp-comm")
    plotting.save(fig, path)
    return ["", "![TP=2's communication overhead per row](%s)" % link]


def switchml_tables(bench, results, display):
    header = ["Backend", "Tensor", "Jobs", "Min ns", "Max ns", "Median ns", "Mean ns", "Std dev ns",
              "Goodput at the median Gbps", "#wrong"]
    rows = []
    for r in results:
        if r.get("error") is not None:
            rows.append(_failed_row(r, header, display))
            continue
        d = r["duration_ns"]
        rows.append([display(r["backend"]), "%d int32 (%s B)" % (r.get("numel", r["bytes"] // 4), r["bytes"]),
                     str(len(r["jobs"])), "%d" % d.get("min", 0), "%d" % d.get("max", 0), "%d" % d.get("median", 0),
                     "%d" % d.get("mean", 0), number(d.get("stddev")), number(r["goodput_gbps"]),
                     markdown.count_cell(r.get("wrong"), "N/A")])
    return markdown.table(header, rows)


def switchml_plot(bench, results, out, display):
    """Bars of the goodput at the median job per backend, log scale; a backend of wrong data left out."""
    measured = [r for r in results if r.get("error") is None and not markdown.is_wrong(r.get("wrong"))]
    if not measured:
        return []
    fig, ax = plotting.figure()
    for k, r in enumerate(measured):
        colour, _ = plotting.style(r["backend"], k)
        ax.bar([k], [r["goodput_gbps"]], 0.6, color=colour)
        ax.text(k, r["goodput_gbps"], number(r["goodput_gbps"]), ha="center", va="bottom", fontsize=8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(measured)))
    ax.set_xticklabels([display(r["backend"]) for r in measured])
    ax.set_ylabel("goodput at the median job (Gbps)")
    plotting.title(ax, "%s: switchml, %s B int32 sum per job" % (machine.short(bench.data), measured[0]["bytes"]),
                   "%s (%s)" % (os.path.basename(bench.path), machine.date(bench.data)))
    path, link = out.plot_path(bench.stem, "goodput")
    plotting.save(fig, path)
    return ["", "![Goodput at the median job per backend](%s)" % link]
