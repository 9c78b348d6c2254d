"""`pickle bench interference`: how much background traffic into a GPU slows the compute running on it.

Seed 001's "NVLink P2P 对计算的影响" table has the shape Size | Pickle | NCCL of relative compute throughput
(time alone / time with traffic; 1 = no effect), with a CE column where the raw copy engine ran too (--backend ce).
Here each cell adds the background bandwidth that was reached inside the timed window, since a relative throughput
of 1 means nothing if the traffic stood still. A row whose background did not overlap the whole window is marked
(and failed the run). A row that several ranks measured (an allgather of N ranks: each times its own foreground)
shows the mean over them with their range, as seed 001 item 6 reports "the mean over the 8 ranks". One table and
one plot per foreground and traffic pattern: relative throughput vs message size per backend (solid, left axis) with
the background's bandwidth (dashed, right axis). A file of `--lanes` (rows with a lane count) has seed 001 item 4's
shape instead: interference_lanes.py."""
import os

from .. import machine, markdown, plotting
from ..inputs import check_optional_nonnegative, is_number, ordered, require
from ..units import number, size_label, size_words
from . import interference_lanes, interference_plot
from .registry import Suite, register

# "ce": the raw copy engine (--backend ce), the reference figures' "CE copies" column.
DISPLAY = {"pickle": "pickle", "nccl": "NCCL", "ce": "CE"}
BACKGROUND_TITLES = {"p2p": "p2p traffic, rank 0 -> rank 1", "allgather": "allgather traffic, %d ranks"}


def display(name):
    return DISPLAY.get(name, name)


def background_title(data, background):
    """The traffic pattern in words; files from before N-rank allgathers had 2 ranks."""
    title = BACKGROUND_TITLES.get(background, background)
    return title % data.get("allgather_ranks", 2) if "%d" in title else title


def check(bench):
    data = bench.data
    results = require(bench, data, "results", list, "the file")
    for i, entry in enumerate(results):
        where = "results[%d]" % i
        for key in ("foreground", "background", "backend"):
            require(bench, entry, key, str, where)
        size = require(bench, entry, "bytes", int, where)
        if size <= 0:
            raise bench.fail("%s.bytes is %d; sizes are positive" % (where, size))
        check_optional_nonnegative(bench, entry, ("t_alone_ms", "t_with_ms", "relative", "relative_min", "relative_max",
                                                  "background_gbps"), where)
        ranks = entry.get("ranks", 1)
        if not isinstance(ranks, int) or isinstance(ranks, bool) or ranks < 0:
            raise bench.fail("%s.ranks is %r; a count of ranks is a non-negative integer" % (where, ranks))
        lanes = entry.get("lanes", 0)
        if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 0:
            raise bench.fail("%s.lanes is %r; a lane count is a non-negative integer" % (where, lanes))
        if not isinstance(entry.get("per_rank", []), list):
            raise bench.fail("%s.per_rank is not a list" % where)
        if entry.get("error") is None:
            for key in ("t_alone_ms", "t_with_ms", "relative"):
                value = require(bench, entry, key, (int, float), where)
                if value <= 0:
                    raise bench.fail("%s.%s is %r; a measured row has a positive value" % (where, key, value))
        elif not isinstance(entry["error"], str):
            raise bench.fail("%s.error is not a string" % where)
        if not isinstance(entry.get("overlap", False), bool):
            raise bench.fail("%s.overlap is not true or false" % where)
        for key in ("background_wrong", "foreground_wrong"):
            value = entry.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise bench.fail("%s.%s is not an integer" % (where, key))
        for key in ("telemetry_alone", "telemetry_with"):
            check_telemetry(bench, entry.get(key), "%s.%s" % (where, key))
    for key in ("foregrounds", "traffic"):
        listed = data.get(key, [])
        if not isinstance(listed, list):
            raise bench.fail("'%s' is not a list" % key)
        for i, item in enumerate(listed):
            require(bench, item, "status", str, "%s[%d]" % (key, i))
    for i, item in enumerate(data.get("foregrounds", [])):
        require(bench, item, "name", str, "foregrounds[%d]" % i)
        flops = item.get("flops")
        if flops is not None and not is_number(flops):
            raise bench.fail("foregrounds[%d].flops is not a number" % i)
    for i, item in enumerate(data.get("traffic", [])):
        require(bench, item, "background", str, "traffic[%d]" % i)
        require(bench, item, "backend", str, "traffic[%d]" % i)
        lanes = item.get("lanes", 0)
        if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 0:
            raise bench.fail("traffic[%d].lanes is %r; a lane count is a non-negative integer" % (i, lanes))
    if not isinstance(data.get("options", {}), dict):
        raise bench.fail("'options' is not an object")
    waived = data.get("waived")
    if waived is not None and not isinstance(waived, str):
        raise bench.fail("'waived' is not a string")


def check_telemetry(bench, value, where):
    """A GPU telemetry summary (gpu_telemetry.hpp) or None: numbers, none negative."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise bench.fail("%s is not an object" % where)
    for key in ("samples", "sm_mhz", "power_w", "power_capped"):
        if not is_number(value.get(key)) or value[key] < 0:
            raise bench.fail("%s.%s is %r; expected a non-negative number" % (where, key, value.get(key)))


def clock_cell(alone, with_traffic):
    """"1980 -> 1890 MHz (0.955), 690 -> 700 W": the GPU's SM clock and power alone and with the traffic."""
    if not alone or not with_traffic or not alone.get("samples") or not with_traffic.get("samples"):
        return "—"
    ratio = with_traffic["sm_mhz"] / alone["sm_mhz"] if alone["sm_mhz"] else 0
    return "%.0f -> %.0f MHz (%.3f), %.0f -> %.0f W" % (alone["sm_mhz"], with_traffic["sm_mhz"], ratio,
                                                       alone["power_w"], with_traffic["power_w"])


class Row(markdown.CheckedPoint):
    def __init__(self, entry):
        self.foreground = entry["foreground"]
        self.background = entry["background"]
        self.backend = entry["backend"]
        self.bytes = entry["bytes"]
        self.alone = entry.get("t_alone_ms")
        self.with_traffic = entry.get("t_with_ms")
        self.relative = entry.get("relative")
        self.ranks = entry.get("ranks", 1)  # files from before N-rank allgathers: one measuring rank
        self.relative_min = entry.get("relative_min")
        self.relative_max = entry.get("relative_max")
        self.gbps = entry.get("background_gbps")
        self.overlap = entry.get("overlap") is True
        self.error = entry.get("error")
        self.lanes = entry.get("lanes", 0)  # --lanes: the child's lane count; 0 in a plain run
        # The foreground GPU's clock and power (files from before them have none).
        self.telemetry_alone = entry.get("telemetry_alone")
        self.telemetry_with = entry.get("telemetry_with")
        wrong = [entry.get("background_wrong"), entry.get("foreground_wrong")]
        self.wrong = None if all(w is None for w in wrong) else sum(w or 0 for w in wrong)

    @property
    def ok(self):
        return self.error is None and self.relative is not None


class Run:
    def __init__(self, bench):
        data = bench.data
        self.bench = bench
        self.options = data.get("options") or {}
        self.rows = [Row(e) for e in data["results"]]
        self.foregrounds = {f["name"]: f for f in data.get("foregrounds", [])}
        self.traffic = {(t["background"], t["backend"], t.get("lanes", 0)): t for t in data.get("traffic", [])}
        self.backends = ordered(self.options.get("backends"), [t[1] for t in self.traffic] +
                                 [r.backend for r in self.rows])
        self.fg_order = ordered(self.options.get("foregrounds"), list(self.foregrounds) +
                                 [r.foreground for r in self.rows])
        self.bg_order = ordered(self.options.get("backgrounds"), [t[0] for t in self.traffic] +
                                 [r.background for r in self.rows])
        self.index = {(r.foreground, r.background, r.backend, r.bytes, r.lanes): r for r in self.rows}
        self.lanes = sorted({r.lanes for r in self.rows if r.lanes} | {t[2] for t in self.traffic if t[2]})

    def sizes(self, foreground, background):
        return sorted({r.bytes for r in self.rows if r.foreground == foreground and r.background == background})

    def row(self, foreground, background, backend, size, lanes=0):
        return self.index.get((foreground, background, backend, size, lanes))

    def cell(self, foreground, background, backend, size, lanes=0):
        row = self.row(foreground, background, backend, size, lanes)
        if row is None:
            state = (self.traffic.get((background, backend, lanes)) or {}).get("status")
            return {"unavailable": "n/a", "failed": "skipped"}.get(state, "—")
        if not row.ok:
            return "FAILED"
        spread = ""
        if row.ranks > 1 and row.relative_min is not None and row.relative_max is not None:
            spread = " [%.3f..%.3f]" % (row.relative_min, row.relative_max)
        text = "%.3f%s (%s GB/s)" % (row.relative, spread, number(row.gbps) if row.gbps is not None else "—")
        if not row.overlap:
            text += " **no overlap**"
        if row.wrong:
            text += " **%d wrong**" % row.wrong
        return text

    def baseline(self, foreground, background):
        """The foreground's time alone over its rows: (median ms, TFLOP/s of it) or None."""
        times = sorted(r.alone for r in self.rows if r.foreground == foreground and r.background == background
                       and r.ok and r.alone)
        if not times:
            return None
        median = times[len(times) // 2] if len(times) % 2 else (times[len(times) // 2 - 1] + times[len(times) // 2]) / 2
        flops = (self.foregrounds.get(foreground) or {}).get("flops")
        return median, (flops / (median * 1e-3) / 1e12 if flops else None)


def _method(run):
    o = run.options
    parts = []
    if "iterations" in o:
        parts.append("foreground alone: %s warm-up + %s iterations timed with CUDA events, then the same with the "
                     "background running; relative = t_alone / t_with" % (o.get("warmup", "?"), o["iterations"]))
    if any(r.ranks > 1 for r in run.rows):
        parts.append("where several ranks timed the foreground, the mean of their relative throughputs, their range "
                     "in brackets")
    if "min_bytes" in o and "max_bytes" in o:
        parts.append("message sizes %s to %s, factor %s" % (size_words(o["min_bytes"]), size_words(o["max_bytes"]),
                                                           o.get("factor", "?")))
    if "depth" in o:
        parts.append("%s background messages in flight" % o["depth"])
    parts.append("background GB/s (1e9 bytes/s) measured inside the timed window; every row must overlap it")
    if "check" in o:
        parts.append("received bytes and foreground results checked" if o["check"] else "data not checked (-c 0)")
    if run.lanes:
        parts.append("each lane count and backend ran as a process set of its own, forced onto its library's network "
                     "path over %s (NCCL: Socket transport with L socket threads; pickle: net transport with L lanes)"
                     % o.get("iface", "?"))
    return "; ".join(parts)


def _foreground_lines(run):
    lines = []
    for name in run.fg_order:
        f = run.foregrounds.get(name)
        if f is None:
            continue
        text = "- %s: **%s**: %s" % (name, f.get("status"), f.get("description") or name)
        if f.get("detail"):
            text += " (%s)" % f["detail"]
        verify = f.get("verify")
        if isinstance(verify, dict) and is_number(verify.get("max_error")):
            text += "; checked against a reference on %s: max error %.2e, tolerance %.0e" % (
                verify.get("shape", "?"), verify["max_error"], verify.get("tolerance") or 0)
        lines.append(text)
    return lines


def _traffic_lines(run):
    lines = []
    for (background, backend, lanes), t in run.traffic.items():
        detail = t.get("detail") or ""
        where = ", %d lane(s)" % lanes if lanes else ""
        lines.append("- %s via %s%s: **%s**%s" % (background, display(backend), where, t["status"],
                                                  (": " + detail) if detail else ""))
    return lines


def _table(run, foreground, background):
    header = ["Size"] + [display(b) for b in run.backends]
    rows = []
    for size in run.sizes(foreground, background):
        rows.append([size_words(size)] + [run.cell(foreground, background, b, size) for b in run.backends])
    return markdown.table(header, rows)


def _clock_table(run, foreground, background):
    """The foreground GPU's SM clock and power beside the relative throughputs, when they were sampled: a clock
    that drops by the same ratio as the throughput says the traffic slowed the kernel through the power budget."""
    sizes = run.sizes(foreground, background)
    sampled = [run.row(foreground, background, b, size) for b in run.backends for size in sizes]
    if not any(row is not None and row.telemetry_with for row in sampled):
        return []
    rows = []
    for size in sizes:
        cells = []
        for backend in run.backends:
            row = run.row(foreground, background, backend, size)
            cells.append(clock_cell(row.telemetry_alone, row.telemetry_with) if row and row.ok else "—")
        rows.append([size_words(size)] + cells)
    return (["", "GPU clock and power of the foreground's GPU, alone -> with the traffic (NVML, means over the timed "
                 "windows; the clock ratio in brackets):", ""] +
            markdown.table(["Size"] + [display(b) for b in run.backends], rows))


def _plot(run, foreground, background, out):
    fig, ax = plotting.figure()
    bw_axis = ax.twinx()
    sizes = run.sizes(foreground, background)

    def rows_of(backend):
        # Rows of wrong data (background or foreground) are no result: the table shows them with their count.
        return sorted((r for r in run.rows if r.foreground == foreground and r.background == background
                       and r.backend == backend and r.good), key=lambda r: r.bytes)

    relatives = interference_plot.draw_series(ax, bw_axis, run.backends, rows_of, lambda r: r.bytes, display, 4)
    plotting.size_axis(ax, sizes)
    description = (run.foregrounds.get(foreground) or {}).get("description") or foreground
    plotting.title(ax, "%s: %s under %s" % (machine.short(run.bench.data), foreground,
                                            background_title(run.bench.data, background)),
                   "%s (%s); %s" % (os.path.basename(run.bench.path), machine.date(run.bench.data),
                                    description.split(":")[0]))
    interference_plot.finish_axes(ax, bw_axis, relatives)
    path, link = out.plot_path(run.bench.stem, foreground, background)
    plotting.save(fig, path)
    return link


def render(bench, out):
    data = bench.data
    if data.get("waived"):
        return ["**Waived**: %s; nothing was measured." % data["waived"]]
    run = Run(bench)
    wrong = markdown.count_wrong((r.backend, r.wrong) for r in run.rows if r.ok)
    lines = markdown.wrong_data_lines(wrong, display, "the plots")
    lines += ["**Method**: %s (docs/bench.md)." % _method(run), "", "**Foregrounds**:"]
    lines += _foreground_lines(run)
    lines += ["", "**Background traffic**:"] + _traffic_lines(run)
    lines += markdown.notes(data)
    if run.lanes:
        return lines + interference_lanes.render(run, out, display)
    shown = False
    for foreground in run.fg_order:
        for background in run.bg_order:
            if not run.sizes(foreground, background):
                continue
            shown = True
            lines += ["", "### %s under %s (relative throughput, background GB/s)" % (
                foreground, background_title(data, background)), ""]
            lines += _table(run, foreground, background)
            lines += _clock_table(run, foreground, background)
            base = run.baseline(foreground, background)
            if base is not None:
                median, tflops = base
                lines += ["", "Baseline (no traffic): %s ms per iteration%s (median over the rows)." % (
                    number(median), ", %s TFLOP/s" % number(tflops) if tflops else "")]
            failures = ["- %s at %s: FAILED: %s" % (display(r.backend), size_words(r.bytes), r.error)
                        for r in run.rows if r.foreground == foreground and r.background == background and not r.ok]
            if failures:
                lines += [""] + failures
            lines += ["", markdown.image("%s under %s: relative throughput vs size" % (foreground, background),
                                         _plot(run, foreground, background, out))]
    if not shown:
        lines += ["", "No measurements: every foreground or backend was unavailable or failed before its first row."]
    return lines


register(Suite("interference", check, render))
