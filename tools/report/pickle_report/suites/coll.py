"""`pickle bench coll`: collectives the nccl-tests way, pickle beside NCCL, per collective, datatype and operator.

Tables have the seeds' shape (Size | pickle | NCCL | pickle/NCCL | #wrong), one per placement (out-of-place,
in-place), with bus bandwidth in GB/s (nccl-tests' busbw: comparable across rank counts); the ratio is pickle's
busbw over the other backend's (above 1: pickle faster). Where pickle's results carry `local_copy_bytes_per_call`
(the copies inside the ranks' own GPUs, SM work on CUDA) a last column gives it per call, over all ranks. Plots: busbw
vs size on a log2 axis, one line per backend and placement (solid out-of-place, dashed in-place)."""
import os

from .. import machine, markdown, plotting
from ..inputs import (backend_status, check_backends_and_options, check_count, check_summary, ordered,
                      require)
from ..units import number, ratio, size_words
from .registry import Suite, register

REFERENCE = "pickle"
DISPLAY = {"pickle": "pickle", "nccl": "NCCL", "nccl-zero": "NCCL zero-CTA"}
PLACEMENTS = [(False, "out-of-place"), (True, "in-place")]


def display(name):
    return DISPLAY.get(name, name)


def check(bench):
    results = require(bench, bench.data, "results", list, "the file")
    for i, entry in enumerate(results):
        where = "results[%d]" % i
        require(bench, entry, "backend", str, where)
        require(bench, entry, "collective", str, where)
        require(bench, entry, "dtype", str, where)
        require(bench, entry, "in_place", bool, where)
        size = require(bench, entry, "bytes", int, where)
        if size <= 0:
            raise bench.fail("%s.bytes is %d; sizes are positive" % (where, size))
        for key in ("time_us", "algbw_gbps", "busbw_gbps"):
            check_summary(bench, entry.get(key), "%s.%s" % (where, key))
        check_count(bench, entry, "wrong", where)
        local = entry.get("local_copy_bytes_per_call")
        if local is not None and (isinstance(local, bool) or not isinstance(local, (int, float)) or local < 0):
            raise bench.fail("%s.local_copy_bytes_per_call is %r; it is a number of bytes or null" % (where, local))
    check_backends_and_options(bench)


class Point(markdown.CheckedPoint):
    """One measured backend x collective x datatype x operator x size x placement."""

    def __init__(self, entry):
        self.backend = entry["backend"]
        self.group = (entry["collective"], entry["dtype"], entry.get("op"))
        self.bytes = entry["bytes"]
        self.in_place = entry["in_place"]
        busbw = entry.get("busbw_gbps")
        self.busbw = (busbw["median"], busbw.get("min"), busbw.get("max")) if busbw else None
        self.wrong = entry.get("wrong")
        self.local_copy = entry.get("local_copy_bytes_per_call")
        self.error = entry.get("error")
        self.unsupported = entry.get("unsupported")

    @property
    def ok(self):
        """Measured: the table shows its figures (and its #wrong)."""
        return self.error is None and self.unsupported is None and self.busbw is not None


class Run:
    """A coll result file, indexed for tables and plots."""

    def __init__(self, bench):
        data = bench.data
        self.bench = bench
        self.options = data.get("options") or {}
        self.status = backend_status(data)
        self.points = [Point(e) for e in data["results"]]
        self.backends = ordered(self.options.get("backends"), list(self.status) + [p.backend for p in self.points])
        self.groups = ordered([], [p.group for p in self.points])
        self.index = {(p.backend, p.group, p.bytes, p.in_place): p for p in self.points}

    def sizes(self, group, in_place=None):
        """The sizes measured for `group` (in one placement, when given)."""
        return sorted({p.bytes for p in self.points
                       if p.group == group and (in_place is None or p.in_place == in_place)})

    def point(self, backend, group, size, in_place):
        return self.index.get((backend, group, size, in_place))

    def cell(self, backend, group, size, in_place):
        point = self.point(backend, group, size, in_place)
        if point is not None:
            if point.unsupported is not None:
                return "unsupported"
            if not point.ok:
                return "FAILED"
            return number(point.busbw[0])
        return markdown.absent_cell(self.status.get(backend, ("not recorded", ""))[0])

    def speedup(self, other, group, size, in_place):
        """pickle's busbw over `other`'s at one size (= other's time / pickle's), or None."""
        mine, theirs = self.point(REFERENCE, group, size, in_place), self.point(other, group, size, in_place)
        if mine is None or theirs is None or not mine.good or not theirs.good or theirs.busbw[0] <= 0:
            return None
        return mine.busbw[0] / theirs.busbw[0]

    def wrong(self, group, size, in_place):
        counts = [(b, self.point(b, group, size, in_place)) for b in self.backends]
        checked = [(b, p.wrong) for b, p in counts if p is not None and p.ok and p.wrong is not None]
        if not checked:
            ran = any(p is not None and p.ok for _, p in counts)
            return "N/A" if ran and self.options.get("check") is False else "—"
        return markdown.wrong_cell(checked, display)

    def local_copies(self, group, size, in_place):
        """pickle's bytes copied inside the ranks' GPUs per call ("0", a size, or "—" where not recorded)."""
        point = self.point(REFERENCE, group, size, in_place)
        if point is None or not point.ok or point.local_copy is None:
            return "—"
        return "0" if point.local_copy == 0 else size_words(int(round(point.local_copy)))

    def has_local_copies(self, group):
        return any(p.local_copy is not None for p in self.points if p.backend == REFERENCE and p.group == group)

    def others(self):
        return [b for b in self.backends if b != REFERENCE]


def _group_title(group):
    collective, dtype, op = group
    return "%s, %s%s" % (collective, dtype, ", " + op if op else "")


def _method(run):
    o = run.options
    parts = []
    if "min_bytes" in o and "max_bytes" in o:
        parts.append("sizes %s to %s, factor %s" % (size_words(o["min_bytes"]), size_words(o["max_bytes"]),
                                                   o.get("factor", "?")))
    if "iterations" in o:
        parts.append("%s calls x %s repeats after %s warm-up, median of the repeats, slowest rank"
                     % (o["iterations"], o.get("repeats", "?"), o.get("warmup", "?")))
    if o.get("timing"):
        parts.append("timed with %s" % o["timing"])
    if "memory" in o:
        parts.append("%s memory" % o["memory"])
    if "world_size" in o:
        parts.append("%s ranks" % o["world_size"])
    if "check" in o:
        parts.append("every result checked" if o["check"] else "results not checked (-c 0)")
    return "; ".join(parts) if parts else "not recorded"


def _table(run, group, in_place):
    others = run.others()
    reference = REFERENCE in run.backends
    header = ["Size"]
    if reference:
        header.append(display(REFERENCE))
        for b in others:
            header += [display(b), "%s/%s" % (display(REFERENCE), display(b))]
    else:
        header += [display(b) for b in run.backends]
    header.append("#wrong")
    local = run.has_local_copies(group)
    if local:
        header.append("%s local copies per call" % display(REFERENCE))
    rows = []
    for size in run.sizes(group, in_place):
        row = [size_words(size)]
        if reference:
            row.append(run.cell(REFERENCE, group, size, in_place))
            for b in others:
                row += [run.cell(b, group, size, in_place), ratio(run.speedup(b, group, size, in_place))]
        else:
            row += [run.cell(b, group, size, in_place) for b in run.backends]
        row.append(run.wrong(group, size, in_place))
        if local:
            row.append(run.local_copies(group, size, in_place))
        rows.append(row)
    return markdown.table(header, rows)


def _plot(run, group, out):
    fig, ax = plotting.figure()
    for i, b in enumerate(run.backends):
        colour, marker = plotting.style(b, i)
        state = run.status.get(b, ("", ""))[0]
        for in_place, words in PLACEMENTS:
            mine = [p for p in run.points if p.backend == b and p.group == group and p.in_place == in_place]
            good = sorted((p for p in mine if p.good), key=lambda p: p.bytes)
            bad = [p for p in mine if p.wrong_data]
            plotting.wrong_marks(ax, [p.bytes for p in bad], [p.busbw[0] for p in bad])
            label = "%s %s%s" % (display(b), words, plotting.wrong_suffix(len(bad)))
            style = "--" if in_place else "-"
            if not good:
                reason = "unavailable" if state == "unavailable" else "no data"
                ax.plot([], [], linestyle=":", color=colour, label="%s: %s" % (label, reason))
                continue
            xs = [p.bytes for p in good]
            ys = [p.busbw[0] for p in good]
            ax.plot(xs, ys, linestyle=style, marker=marker, markersize=4, color=colour, label=label,
                    markerfacecolor="none" if in_place else colour)
            lows = [p.busbw[1] if p.busbw[1] is not None else y for p, y in zip(good, ys)]
            highs = [p.busbw[2] if p.busbw[2] is not None else y for p, y in zip(good, ys)]
            ax.fill_between(xs, lows, highs, color=colour, alpha=0.1, linewidth=0)
    plotting.size_axis(ax, run.sizes(group), label="size (bytes, nccl-tests' convention)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_ylim(bottom=0)
    plotting.title(ax, "%s: %s busbw vs size" % (machine.short(run.bench.data), _group_title(group)),
                   "%s (%s); median of repeats, band = min..max" % (os.path.basename(run.bench.path),
                                                                    machine.date(run.bench.data)))
    ax.legend(fontsize=7, loc="upper left")
    collective, dtype, op = group
    path, link = out.plot_path(run.bench.stem, collective, dtype, op or "none", "busbw")
    plotting.save(fig, path)
    return link


def _averages(run):
    averages = run.bench.data.get("avg_busbw") or []
    lines = []
    for a in averages:
        if isinstance(a, dict) and isinstance(a.get("busbw_gbps"), (int, float)):
            line = "- %s, %s: %s GB/s" % (display(a.get("backend", "?")), a.get("collective", "?"),
                                          number(a["busbw_gbps"]))
            # The bench averages every measured row, wrong data included: where there is some, the mean is taken
            # again here over the rows whose check passed, and the bench's figure is given beside it.
            rows = [p for p in run.points if p.backend == a.get("backend") and p.group[0] == a.get("collective")]
            bad = sum(1 for p in rows if p.wrong_data)
            if bad:
                good = [p.busbw[0] for p in rows if p.good]
                name = "- %s, %s: " % (display(a["backend"]), a["collective"])
                if good:
                    line = name + "%s GB/s over %s with right data (%d with **WRONG DATA** left out; the bench's " \
                        "average over all of them: %s GB/s)" % (number(sum(good) / len(good)), markdown.rows(len(good)),
                                                                 bad, number(a["busbw_gbps"]))
                else:
                    line = name + "n/a: %s, all with **WRONG DATA** (the bench's average over them: %s GB/s)" % (
                        markdown.rows(bad), number(a["busbw_gbps"]))
            lines.append(line)
    return lines


def render(bench, out):
    run = Run(bench)
    wrong = markdown.count_wrong((p.backend, p.wrong) for p in run.points if p.ok)
    lines = markdown.wrong_data_lines(wrong, display)
    lines += ["**Method**: %s (docs/bench.md). Bus bandwidth (busbw) = algbw x nccl-tests' factor: allreduce "
              "2(n-1)/n; allgather, reduce_scatter, alltoall (n-1)/n; broadcast 1." % _method(run), "",
              "**Backends**:"]
    lines += markdown.backend_lines(run.backends, run.status, display, wrong)
    lines += markdown.notes(bench.data)
    averages = _averages(run)
    if averages:
        lines += ["", "**Average bus bandwidth** (nccl-tests' footer: mean over sizes and placements):"] + averages
    if not run.groups:
        lines += ["", "No measurements: every backend was unavailable or failed before its first size."]
    for group in run.groups:
        lines += ["", "### %s (busbw, GB/s)" % _group_title(group)]
        for in_place, words in PLACEMENTS:
            lines += ["", "**%s**" % words.capitalize(), ""]
            if run.sizes(group, in_place):
                lines += _table(run, group, in_place)
            else:
                lines.append("Not measured.")
        failures = ["- %s %s at %s: FAILED: %s" % (display(p.backend), "in-place" if p.in_place else "out-of-place",
                                                 size_words(p.bytes), p.error)
                    for p in run.points if p.group == group and p.error is not None]
        if failures:
            lines += [""] + failures
        lines += ["", markdown.image("%s busbw vs size" % _group_title(group), _plot(run, group, out))]
    return lines


register(Suite("coll", check, render))
