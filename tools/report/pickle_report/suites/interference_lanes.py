"""`pickle bench interference --lanes`: seed 001 item 4, "RDMA P2P 对计算的影响 vs QP": relative compute throughput
(time alone / time with traffic) against the number of QPs, pickle vs NCCL. Each lane count ran as its own process
set with both libraries forced onto their network path (pickle's net transport with L lanes, NCCL's Socket transport
with L socket threads), so a row carries its lane count. Per foreground: one table per message size in the seed's
shape, lanes | pickle | NCCL | ratio (pickle's relative throughput over NCCL's: above 1, pickle's traffic slows the
compute less), each cell with the background bandwidth beside it; and one plot of relative throughput vs lanes per
backend at the largest message size, the background bandwidth dashed on a second axis."""
import os

from .. import machine, markdown, plotting
from . import interference_plot
from ..units import size_words

BACKGROUND = "p2p"  # --lanes runs the p2p background only


def _good(run, foreground, backend, size):
    """The measured rows of one backend at one size, by lane count."""
    return sorted((r for r in run.rows if r.foreground == foreground and r.background == BACKGROUND
                   and r.backend == backend and r.bytes == size and r.lanes and r.good), key=lambda r: r.lanes)


def _ratio(run, foreground, size, lanes):
    """pickle's relative throughput over NCCL's at one lane count, when both measured it."""
    mine = run.row(foreground, BACKGROUND, "pickle", size, lanes)
    theirs = run.row(foreground, BACKGROUND, "nccl", size, lanes)
    if mine is None or theirs is None or not mine.ok or not theirs.ok or not theirs.relative:
        return "—"
    return "%.3f" % (mine.relative / theirs.relative)


def _table(run, foreground, size, display):
    with_ratio = "pickle" in run.backends and "nccl" in run.backends
    header = ["lanes"] + [display(b) for b in run.backends] + (["ratio"] if with_ratio else [])
    rows = []
    for lanes in run.lanes:
        row = [str(lanes)] + [run.cell(foreground, BACKGROUND, b, size, lanes) for b in run.backends]
        if with_ratio:
            row.append(_ratio(run, foreground, size, lanes))
        rows.append(row)
    return markdown.table(header, rows)


def _plot(run, foreground, size, out, display):
    fig, ax = plotting.figure()
    bw_axis = ax.twinx()
    relatives = interference_plot.draw_series(ax, bw_axis, run.backends,
                                              lambda backend: _good(run, foreground, backend, size),
                                              lambda r: r.lanes, display, 5)
    ax.set_xticks(run.lanes)
    ax.set_xlim(min(run.lanes) - 0.5, max(run.lanes) + 0.5)
    ax.set_xlabel("lanes (pickle: net transport endpoints; NCCL: socket threads) — the seed's QPs")
    iface = run.options.get("iface") or "?"
    plotting.title(ax, "%s: %s under network p2p (%s), %s messages" % (machine.short(run.bench.data), foreground,
                                                                        iface, size_words(size)),
                   "%s (%s); the largest message size" % (os.path.basename(run.bench.path),
                                                           machine.date(run.bench.data)))
    interference_plot.finish_axes(ax, bw_axis, relatives)
    path, link = out.plot_path(run.bench.stem, foreground, "lanes")
    plotting.save(fig, path)
    return link


def render(run, out, display):
    """The Markdown lines of a --lanes file's measurements (after the method, foregrounds and traffic lines)."""
    lines = []
    shown = False
    for foreground in run.fg_order:
        sizes = run.sizes(foreground, BACKGROUND)
        if not sizes:
            continue
        shown = True
        for size in sizes:
            lines += ["", "### %s under network p2p traffic, %s messages, by lanes (relative throughput, background "
                          "GB/s; ratio = pickle / NCCL)" % (foreground, size_words(size)), ""]
            lines += _table(run, foreground, size, display)
        failures = ["- %s, %d lane(s), at %s: FAILED: %s" % (display(r.backend), r.lanes, size_words(r.bytes), r.error)
                    for r in run.rows if r.foreground == foreground and r.background == BACKGROUND and not r.ok]
        if failures:
            lines += [""] + failures
        largest = sizes[-1]
        lines += ["", markdown.image("%s: relative throughput vs lanes at %s" % (foreground, size_words(largest)),
                                     _plot(run, foreground, largest, out, display)),
                  "", "Relative throughput vs lanes at the largest message size, %s (the tables above have every "
                      "size); dashed: the background's bandwidth inside the timed window." % size_words(largest)]
    if not shown:
        lines += ["", "No measurements: every foreground or child was unavailable or failed before its first row."]
    return lines
