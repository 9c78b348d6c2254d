"""`pickle bench p2p`: pickle beside NCCL and the raw copy engine (CE), per mode (uni, bi, lat) and message size.

Tables have the seeds' shape (Size | pickle | NCCL | ratio, then CE and pickle/CE, then #wrong); ratios are pickle's
speed-up, the other backend's time over pickle's (above 1: pickle faster, for latency too). Plots: bandwidth vs size
per mode, latency vs size for `lat`, and pickle's speed-up per size as bars."""
import os

from .. import machine, markdown, plotting
from ..inputs import (backend_status, check_backends_and_options, check_count, check_summary, ordered,
                      require)
from ..units import number, ratio, size_label, size_words
from .registry import Suite, register

REFERENCE = "pickle"
MODE_TITLES = {
    "uni": ("Unidirectional, rank 0 -> rank 1", "GB/s"),
    "bi": ("Bidirectional, both ranks at once", "GB/s summed over both directions"),
    "lat": ("One-way latency, half a ping-pong round trip", "us per message"),
}
BW_AXIS = {
    "uni": "bandwidth (GB/s)",
    "bi": "bandwidth, both directions summed (GB/s)",
    "lat": "bandwidth, one way (GB/s)",
}
DISPLAY = {"pickle": "pickle", "nccl": "NCCL", "nccl-zero": "NCCL zero-CTA", "ce": "CE"}


def _short_mode(mode):
    return MODE_TITLES[mode][0].split(",")[0].lower() if mode in MODE_TITLES else "mode " + mode


def display(name):
    return DISPLAY.get(name, name)


class Point(markdown.CheckedPoint):
    """One measured (backend, mode, size): medians and spreads, or the failure."""

    def __init__(self, entry):
        self.backend = entry["backend"]
        self.mode = entry["mode"]
        self.bytes = entry["bytes"]
        time_us = entry.get("time_us")
        bw = entry.get("algbw_gbps")
        self.time = (time_us["median"], time_us.get("min"), time_us.get("max")) if time_us else None
        self.bw = (bw["median"], bw.get("min"), bw.get("max")) if bw else None
        self.wrong = entry.get("wrong")
        self.error = entry.get("error")
        self.repeats = entry.get("repeats")

    @property
    def ok(self):
        """Measured: the table shows its figures (and its #wrong)."""
        return self.error is None and self.time is not None and self.time[0] is not None


def check(bench):
    data = bench.data
    results = require(bench, data, "results", list, "the file")
    for i, entry in enumerate(results):
        where = "results[%d]" % i
        require(bench, entry, "backend", str, where)
        require(bench, entry, "mode", str, where)
        size = require(bench, entry, "bytes", int, where)
        if size <= 0:
            raise bench.fail("%s.bytes is %d; sizes are positive" % (where, size))
        for key in ("time_us", "algbw_gbps"):
            check_summary(bench, entry.get(key), "%s.%s" % (where, key))
        check_count(bench, entry, "wrong", where)
    check_backends_and_options(bench)


class Run:
    """A p2p result file, indexed for tables and plots."""

    def __init__(self, bench):
        data = bench.data
        self.bench = bench
        self.options = data.get("options") or {}
        self.status = backend_status(data)
        self.points = [Point(e) for e in data["results"]]
        self.backends = ordered(self.options.get("backends"), list(self.status) + [p.backend for p in self.points])
        self.modes = ordered(self.options.get("modes"), [p.mode for p in self.points])
        self.index = {(p.backend, p.mode, p.bytes): p for p in self.points}

    def sizes(self, mode):
        return sorted({p.bytes for p in self.points if p.mode == mode})

    def point(self, backend, mode, size):
        return self.index.get((backend, mode, size))

    def state(self, backend):
        return self.status.get(backend, ("not recorded", ""))[0]

    def cell(self, backend, mode, size):
        """The table text for one backend at one size: its value, or why there is none."""
        point = self.point(backend, mode, size)
        if point is not None:
            if not point.ok:
                return "FAILED"
            return number(point.time[0]) if mode == "lat" else number(point.bw[0] if point.bw else None)
        return markdown.absent_cell(self.state(backend))

    def speedup(self, other, mode, size):
        """pickle's speed-up over `other` at one size: other's time / pickle's time, or None."""
        mine, theirs = self.point(REFERENCE, mode, size), self.point(other, mode, size)
        if mine is None or theirs is None or not mine.good or not theirs.good:
            return None
        return theirs.time[0] / mine.time[0]

    def wrong_at(self, other, mode, size):
        """Whether pickle's or `other`'s point at this size has wrong data (its ratio is then left out)."""
        return any(p is not None and p.wrong_data for p in (self.point(REFERENCE, mode, size),
                                                             self.point(other, mode, size)))

    def wrong(self, mode, size):
        counts = [(b, self.point(b, mode, size).wrong) for b in self.backends
                  if self.point(b, mode, size) is not None and self.point(b, mode, size).ok]
        checked = [(b, w) for b, w in counts if w is not None]
        if not checked:
            return "N/A" if counts and self.options.get("check") is False else "—"
        return markdown.wrong_cell(checked, display)

    def others(self):
        return [b for b in self.backends if b != REFERENCE] if REFERENCE in self.backends else []


def _method(run):
    o = run.options
    parts = []
    if "min_bytes" in o and "max_bytes" in o:
        parts.append("sizes %s to %s, factor %s" % (size_words(o["min_bytes"]), size_words(o["max_bytes"]),
                                                   o.get("factor", "?")))
    if "iterations" in o:
        parts.append("%s iterations x %s repeats after %s warm-up, median of the repeats"
                     % (o["iterations"], o.get("repeats", "?"), o.get("warmup", "?")))
    if "memory" in o:
        parts.append("%s memory" % o["memory"])
    if "world_size" in o:
        parts.append("%s ranks" % o["world_size"])
    if "check" in o:
        parts.append("every byte checked" if o["check"] else "data not checked (-c 0)")
    if any(e.get("gated") is False for e in run.bench.data["results"]):
        parts.append("some points enqueued with the gate open (`gated: false`)")
    return "; ".join(parts) if parts else "not recorded"


def _failures(run, mode):
    lines = []
    for p in run.points:
        if p.mode == mode and not p.ok:
            error = p.error if p.error is not None else "no time recorded"
            lines.append("- %s at %s: FAILED: %s" % (display(p.backend), size_words(p.bytes), error))
    return lines


def _table(run, mode):
    others = run.others()
    header = ["Size"] + [display(b) for b in run.backends if b == REFERENCE]
    for b in others:
        header += [display(b), "%s/%s" % (display(REFERENCE), display(b))]
    if REFERENCE not in run.backends:
        header = ["Size"] + [display(b) for b in run.backends]
    header.append("#wrong")
    rows = []
    for size in run.sizes(mode):
        row = [size_words(size)]
        if REFERENCE in run.backends:
            row.append(run.cell(REFERENCE, mode, size))
            for b in others:
                row += [run.cell(b, mode, size), ratio(run.speedup(b, mode, size))]
        else:
            row += [run.cell(b, mode, size) for b in run.backends]
        row.append(run.wrong(mode, size))
        rows.append(row)
    return markdown.table(header, rows)


def _legend_label(run, backend, mode):
    state, _ = run.status.get(backend, ("", ""))
    points = [p for p in run.points if p.backend == backend and p.mode == mode]
    failed = [p for p in points if not p.ok]
    wrong = plotting.wrong_suffix(sum(1 for p in points if p.wrong_data))
    if state == "unavailable":
        return "%s: unavailable" % display(backend)
    if failed:
        return "%s (FAILED at %s)%s" % (display(backend), size_label(min(p.bytes for p in failed)), wrong)
    if not points:
        return "%s: %s, no data" % (display(backend), state or "not run")
    return display(backend) + wrong


def _line_plot(run, mode, out, kind):
    """Bandwidth (kind 'bandwidth') or latency (kind 'latency') vs size, one line per backend with a min-max band."""
    fig, ax = plotting.figure()
    for i, b in enumerate(run.backends):
        colour, marker = plotting.style(b, i)
        good = sorted((p for p in run.points if p.backend == b and p.mode == mode and p.good), key=lambda p: p.bytes)
        label = _legend_label(run, b, mode)
        bad = [(p.bytes, p.bw if kind == "bandwidth" else p.time) for p in run.points
               if p.backend == b and p.mode == mode and p.wrong_data]
        bad = [(x, v[0]) for x, v in bad if v and v[0] is not None]
        plotting.wrong_marks(ax, [x for x, _ in bad], [y for _, y in bad])
        if not good:
            ax.plot([], [], linestyle=":", color=colour, label=label)
            continue
        xs = [p.bytes for p in good]
        values = [p.bw if kind == "bandwidth" else p.time for p in good]
        ys = [v[0] if v else float("nan") for v in values]
        ax.plot(xs, ys, marker=marker, markersize=4, color=colour, label=label)
        lows = [v[1] if v and v[1] is not None else y for v, y in zip(values, ys)]
        highs = [v[2] if v and v[2] is not None else y for v, y in zip(values, ys)]
        ax.fill_between(xs, lows, highs, color=colour, alpha=0.15, linewidth=0)
    plotting.size_axis(ax, run.sizes(mode))
    if kind == "bandwidth":
        ax.set_ylabel(BW_AXIS.get(mode, "bandwidth (GB/s)"))
        ax.set_ylim(bottom=0)
    else:
        ax.set_yscale("log")
        ax.set_ylabel("time per message, one way (us, log scale)")
    plotting.title(ax, "%s: p2p %s, %s vs size" % (machine.short(run.bench.data), _short_mode(mode), kind),
                   "%s (%s); median of repeats, band = min..max" % (os.path.basename(run.bench.path),
                                                                    machine.date(run.bench.data)))
    ax.legend(fontsize=8, loc="upper left")
    path, link = out.plot_path(run.bench.stem, mode, kind)
    plotting.save(fig, path)
    return link


def _ratio_plot(run, mode, out):
    """pickle's speed-up over each other backend, bars grouped per size; None when there is nothing to compare."""
    sizes = run.sizes(mode)
    series = []
    for b in run.others():
        values = [run.speedup(b, mode, s) for s in sizes]
        if any(v is not None for v in values):
            series.append((b, values, [run.wrong_at(b, mode, s) for s in sizes]))
    if not series:
        return None
    fig, ax = plotting.figure()
    width = 0.8 / len(series)
    for k, (b, values, wrong) in enumerate(series):
        colour, _ = plotting.style(b, run.backends.index(b))
        xs = [i - 0.4 + width * (k + 0.5) for i in range(len(sizes))]
        heights = [v if v is not None else 0.0 for v in values]
        label = "%s/%s%s" % (display(REFERENCE), display(b), plotting.wrong_suffix(sum(wrong)))
        bars = ax.bar(xs, heights, width=width * 0.95, color=colour, label=label)
        for bar, v, bad in zip(bars, values, wrong):
            # ratio() as the tables: "%.2f" printed 0.0073 as 0.01 and anything below 0.005 as 0.00.
            text = ratio(v) if v is not None else ("wrong data" if bad else "n/a")
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=6,
                        color=plotting.WRONG_COLOUR if bad else "black",
                        rotation=90 if bad or len(sizes) * len(series) > 12 else 0)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--", label="parity")
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels([size_label(s) for s in sizes])
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("speed-up of pickle (x; > 1: pickle faster)")
    top = max(v for _, values, _ in series for v in values if v is not None)
    ax.set_ylim(0, max(1.3, top * 1.4))  # headroom: the legend sits above the tallest bar, not on one
    plotting.title(ax, "%s: p2p %s, pickle's speed-up per size" % (machine.short(run.bench.data), _short_mode(mode)),
                   "%s (%s); ratio of median times" % (os.path.basename(run.bench.path),
                                                        machine.date(run.bench.data)))
    ax.legend(fontsize=8, loc="upper center", ncol=len(series) + 1)
    path, link = out.plot_path(run.bench.stem, mode, "ratio")
    plotting.save(fig, path)
    return link


def render(bench, out):
    run = Run(bench)
    wrong = markdown.count_wrong((p.backend, p.wrong) for p in run.points if p.ok)
    lines = markdown.wrong_data_lines(wrong, display)
    lines += ["**Method**: %s (docs/bench.md)." % _method(run), "", "**Backends**:"]
    lines += markdown.backend_lines(run.backends, run.status, display, wrong)
    lines += markdown.notes(bench.data)
    for mode in run.modes:
        title, unit = MODE_TITLES.get(mode, ("Mode %s" % mode, "GB/s"))
        lines += ["", "### %s (%s)" % (title, unit), ""]
        if not run.sizes(mode):
            lines.append("No measurements in this mode: every backend was unavailable or failed before it.")
            continue
        lines += _table(run, mode)
        failures = _failures(run, mode)
        if failures:
            lines += [""] + failures
        lines += ["", markdown.image("%s bandwidth vs size" % mode, _line_plot(run, mode, out, "bandwidth"))]
        if mode == "lat":
            lines += ["", markdown.image("%s latency vs size" % mode, _line_plot(run, mode, out, "latency"))]
        link = _ratio_plot(run, mode, out)
        if link:
            lines += ["", markdown.image("%s speed-up of pickle per size" % mode, link)]
        else:
            lines += ["", "No speed-up chart: pickle and no other backend both have measurements%s in this mode."
                      % (" with right data" if any(p.wrong_data for p in run.points if p.mode == mode) else "")]
    return lines


register(Suite("p2p", check, render))
