"""The `memcpy` suite: plain stream copies from rank 0 into rank 1's mapped buffer, seed 001's three columns
(async and sync without overhead, sync with the import/release of the mapping per copy)."""
import os

from .. import machine, markdown, plotting
from ..inputs import require
from ..units import number, size_words
from .registry import Suite, register

# (JSON key, table heading, legend label) of the three columns, in the seed's order.
COLUMNS = [
    ("async", "Async", "async, without overhead"),
    ("sync", "Sync", "sync, without overhead"),
    ("sync_overhead", "Sync With Overhead", "sync, with overhead (import + copy + sync + release)"),
]
# (colour, marker) per column, the same in both plots.
STYLE = {"async": ("tab:blue", "o"), "sync": ("tab:orange", "s"), "sync_overhead": ("tab:red", "^")}
TABLE_HEADER = ["Chunk Size"] + [h for _, heading, _ in COLUMNS for h in ("%s ms" % heading, "%s GB/s" % heading)] \
    + ["#wrong"]


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check(bench):
    results = require(bench, bench.data, "results", list, "the file")
    for i, entry in enumerate(results):
        where = "results[%d]" % i
        size = require(bench, entry, "bytes", int, where)
        if size <= 0:
            raise bench.fail("%s.bytes is %d; sizes are positive" % (where, size))
        for key, _, _ in COLUMNS:
            if key not in entry:
                raise bench.fail("%s lacks the key %r" % (where, key))
            column = entry[key]
            if column is None:
                continue
            ms = require(bench, column, "ms", (int, float), "%s.%s" % (where, key))
            if ms < 0:
                raise bench.fail("%s.%s.ms is %r; times are not negative" % (where, key, ms))
            for extra in ("gbps", "median_ms", "min_ms", "max_ms"):
                if column.get(extra) is not None and not _number(column[extra]):
                    raise bench.fail("%s.%s.%s is not a number" % (where, key, extra))
            if column.get("wrong") is not None and not isinstance(column["wrong"], int):
                raise bench.fail("%s.%s.wrong is not an integer" % (where, key))
        wrong = entry.get("wrong")
        if wrong is not None and (not isinstance(wrong, int) or isinstance(wrong, bool)):
            raise bench.fail("%s.wrong is not an integer" % where)
        if entry.get("error") is not None and not isinstance(entry["error"], str):
            raise bench.fail("%s.error is not a string" % where)
    if not isinstance(bench.data.get("options", {}), dict):
        raise bench.fail("'options' is not an object")


def _gbps(size, ms):
    """1e9 bytes per second, as the seed and `pickle bench memcpy`; None for a time of zero."""
    return size / (ms * 1e6) if ms else None


def _column_gbps(entry, key):
    column = entry[key]
    if column is None:
        return None
    return column["gbps"] if _number(column.get("gbps")) else _gbps(entry["bytes"], column["ms"])


def _ms(value):
    """ms per copy with the digits `pickle bench memcpy` prints: 0.0026, 9.607, 173.2."""
    if value is None:
        return "—"
    if value < 0.001:  # host-memory copies of a few KiB: keep three significant digits
        return "%.3g" % value
    return "%.4f" % value if value < 1 else ("%.3f" % value if value < 100 else "%.1f" % value)


def _rate(value):
    """GB/s; three significant digits below 1 (the with-overhead column reaches 0.000426 GB/s)."""
    if value is None:
        return "—"
    return "%.3g" % value if value < 1 else number(value)


def _count(wrong):
    return markdown.count_cell(wrong, "—")


def _wrong(entry):
    columns = [entry[key] for key, _, _ in COLUMNS]
    if all(c is None for c in columns):
        return "—"
    if any(c is None for c in columns):
        # The row's sum covers only the columns that ran: a bare "0" read as if all three had been checked. Per
        # column, then, with "—" for one that failed or did not run.
        return ", ".join("%s %s" % (heading, _count(None if c is None else c.get("wrong")))
                         for (_, heading, _), c in zip(COLUMNS, columns))
    return _count(entry.get("wrong"))


def _column_wrong(entry, key):
    """The #wrong of one column; the row's when the column does not give its own (a file of one column's check)."""
    column = entry[key]
    if column is not None and column.get("wrong") is not None:
        return column["wrong"]
    return entry.get("wrong")


def _row(entry):
    row = [size_words(entry["bytes"])]
    for key, _, _ in COLUMNS:
        column = entry[key]
        if column is None:
            cell = "FAILED" if entry.get("error") else "not run"
            row += [cell, cell]
        else:
            row += [_ms(column["ms"]), _rate(_column_gbps(entry, key))]
    row.append(_wrong(entry))
    return row


def _method(bench):
    o = bench.data.get("options") or {}
    parts = []
    if "min_bytes" in o and "max_bytes" in o:
        parts.append("chunks %s to %s, factor %s" % (size_words(o["min_bytes"]), size_words(o["max_bytes"]),
                                                    o.get("factor", "?")))
    if "iterations" in o:
        parts.append("%s copies per column after %s warm-up; ms per copy is the mean"
                     % (o["iterations"], o.get("warmup", "?")))
    if "memory" in o:
        parts.append("%s memory" % o["memory"])
    if "method" in o:
        parts.append("rank 1's buffer allocated by %s" % o["method"])
    if "world_size" in o:
        parts.append("%s ranks" % o["world_size"])
    parts.append("GB/s = 1e9 bytes/s")
    return "; ".join(parts)


def _series(results, key, value):
    """(sizes, values, lows, highs) of one column for plotting; value 'gbps' or 'ms'. Bands from min/max ms."""
    xs, ys, lows, highs = [], [], [], []
    for entry in results:
        column = entry[key]
        if column is None or not column["ms"] or markdown.is_wrong(_column_wrong(entry, key)):
            continue  # not measured, or its data check failed: no result (_wrong_points marks those)
        size = entry["bytes"]
        fast = column.get("min_ms") if _number(column.get("min_ms")) else column["ms"]
        slow = column.get("max_ms") if _number(column.get("max_ms")) else column["ms"]
        xs.append(size)
        if value == "gbps":
            ys.append(_column_gbps(entry, key))
            lows.append(_gbps(size, slow) or ys[-1])
            highs.append(_gbps(size, fast) or ys[-1])
        else:
            ys.append(column["ms"])
            lows.append(fast or column["ms"])
            highs.append(slow)
    return xs, ys, lows, highs


def _wrong_points(results, key, value):
    """(sizes, values) of one column's copies whose data check failed."""
    xs, ys = [], []
    for entry in results:
        column = entry[key]
        if column is not None and column["ms"] and markdown.is_wrong(_column_wrong(entry, key)):
            xs.append(entry["bytes"])
            ys.append(_column_gbps(entry, key) if value == "gbps" else column["ms"])
    return xs, ys


def _plot(bench, results, out, value):
    fig, ax = plotting.figure()
    sizes = [e["bytes"] for e in results]
    for i, (key, _, label) in enumerate(COLUMNS):
        colour, marker = STYLE.get(key) or plotting.style(key, i)
        xs, ys, lows, highs = _series(results, key, value)
        bad_xs, bad_ys = _wrong_points(results, key, value)
        plotting.wrong_marks(ax, bad_xs, bad_ys)
        label += plotting.wrong_suffix(len(bad_xs))
        if not xs:
            ax.plot([], [], linestyle=":", color=colour, label="%s: no data" % label)
            continue
        ax.plot(xs, ys, marker=marker, markersize=4, color=colour, label=label)
        ax.fill_between(xs, lows, highs, color=colour, alpha=0.15, linewidth=0)
    plotting.size_axis(ax, sizes, "chunk size (bytes)")
    if value == "gbps":
        ax.set_ylabel("bandwidth (GB/s, 1e9 bytes/s)")
        ax.set_ylim(bottom=0)
        what, band = "bandwidth", "GB/s of the mean time, band = slowest..fastest copy"
    else:
        ax.set_yscale("log")
        ax.set_ylabel("time per copy (ms, log scale)")
        what, band = "ms per copy", "mean ms per copy, band = min..max copy"
    plotting.title(ax, "%s: memcpy, %s vs chunk size" % (machine.short(bench.data), what),
                   "%s (%s); %s" % (os.path.basename(bench.path), machine.date(bench.data), band))
    ax.legend(fontsize=8, loc="best")
    path, link = out.plot_path(bench.stem, "bandwidth" if value == "gbps" else "time")
    plotting.save(fig, path)
    return link


def render(bench, out):
    results = sorted(bench.data["results"], key=lambda e: e["bytes"])
    # No backends here: the copies are the one "backend"; a row counts once, with its #wrong over the three columns.
    wrong = markdown.count_wrong(("the copies", e.get("wrong")) for e in results)
    lines = markdown.wrong_data_lines(wrong, lambda name: name, "the plots")
    lines += ["**Method**: %s (docs/bench.md)." % _method(bench)]
    lines += markdown.notes(bench.data)
    lines += ["", "### Plain copies into the peer's mapped buffer (seed 001's cudaMemcpyAsync table)", ""]
    if not results:
        lines.append("No measurements: the run stopped before its first chunk size.")
        return lines
    lines += markdown.table(TABLE_HEADER, [_row(e) for e in results])
    errors = ["- at %s: FAILED: %s" % (size_words(e["bytes"]), e["error"]) for e in results if e.get("error")]
    if errors:
        lines += [""] + errors
    lines += ["", "\"With overhead\" imports rank 1's buffer, copies, synchronizes and releases the mapping for every "
              "copy; `#wrong` sums the wrong bytes of the three columns."]
    lines += ["", markdown.image("memcpy bandwidth vs chunk size", _plot(bench, results, out, "gbps"))]
    lines += ["", markdown.image("memcpy time per copy vs chunk size", _plot(bench, results, out, "ms"))]
    return lines


register(Suite("memcpy", check, render))
