"""The `ipc` suite: what importing a peer's exported memory costs per export method and buffer size (open, close,
re-open), and what pickle's mapping cache saves (first transfer vs the steady state)."""
import os

from .. import machine, markdown, plotting
from ..inputs import check_count, require
from ..units import number, size_words
from .registry import Suite, register

# (JSON key, table heading, legend label, line style) of the timed calls.
CALLS = [
    ("open_us", "open us", "open (import)", "-"),
    ("close_us", "close us", "close (release)", "--"),
    ("reopen_us", "re-open us", "re-open (import again)", ":"),
]
# (colour, marker) per call; re-open lies on top of open, so its markers are hollow and larger to stay visible.
STYLE = {"open_us": ("tab:blue", "o"), "close_us": ("tab:orange", "s"), "reopen_us": ("tab:green", "D")}
TABLE_HEADER = ["buffer"] + [heading for _, heading, _, _ in CALLS] + ["#wrong"]
CACHE_HEADER = ["transfer", "time us", "ipc_opens"]
METHOD_WORDS = {
    "cudaMalloc": "cudaMalloc, exported as a cudaIpc handle",
    "vmm": "VMM, exported as a POSIX fd (open = import + map + set access)",
    "memfd": "host memory in a memfd, exported as its fd (open = mmap)",
}


def _check_summary(bench, value, where, positive=False):
    if value is None:
        return
    median = require(bench, value, "median", (int, float), where)
    if median < 0 or positive and median == 0:
        raise bench.fail("%s.median is %r; times are positive" % (where, median))
    for bound in ("min", "max"):
        if value.get(bound) is not None and not isinstance(value[bound], (int, float)):
            raise bench.fail("%s.%s is not a number" % (where, bound))


def check(bench):
    results = require(bench, bench.data, "results", list, "the file")
    for i, entry in enumerate(results):
        where = "results[%d]" % i
        require(bench, entry, "method", str, where)
        require(bench, entry, "status", str, where)
        size = require(bench, entry, "bytes", int, where)
        if size <= 0:
            raise bench.fail("%s.bytes is %d; sizes are positive" % (where, size))
        for key, _, _, _ in CALLS:
            _check_summary(bench, entry.get(key), "%s.%s" % (where, key))
        check_count(bench, entry, "wrong", where)
    cache = bench.data.get("cache")
    if cache is not None:
        if not isinstance(cache, dict):
            raise bench.fail("'cache' is not an object")
        if cache.get("first_us") is not None and not isinstance(cache["first_us"], (int, float)):
            raise bench.fail("cache.first_us is not a number")
        _check_summary(bench, cache.get("steady_us"), "cache.steady_us")
        for key in ("bytes", "first_ipc_opens", "steady_ipc_opens", "wrong"):
            check_count(bench, cache, key, "cache")
    if not isinstance(bench.data.get("options", {}), dict):
        raise bench.fail("'options' is not an object")


def _methods(results):
    order = []
    for entry in results:
        if entry["method"] not in order:
            order.append(entry["method"])
    return order


def _spread(value):
    """'median [min..max]' of a summary, or None."""
    if value is None:
        return None
    if value.get("min") is None or value.get("max") is None:
        return number(value["median"])
    return "%s [%s..%s]" % (number(value["median"]), number(value["min"]), number(value["max"]))


def _row(entry):
    status = entry["status"]
    if status == "unavailable":
        missing = "n/a"
    elif status == "failed":
        missing = "FAILED"
    else:
        missing = "—"
    row = [size_words(entry["bytes"])]
    row += [_spread(entry.get(key)) or missing for key, _, _, _ in CALLS]
    wrong = entry.get("wrong")
    row.append(markdown.count_cell(wrong, "—"))
    return row


def _method_line(bench):
    o = bench.data.get("options") or {}
    parts = []
    if "min_bytes" in o and "max_bytes" in o:
        parts.append("buffers %s to %s, factor %s" % (size_words(o["min_bytes"]), size_words(o["max_bytes"]),
                                                     o.get("factor", "?")))
    if "repeats" in o:
        parts.append("%s timed open/close/re-open cycles after %s warm-up, median [min..max] in us"
                     % (o["repeats"], o.get("warmup", "?")))
    if "memory" in o:
        parts.append("%s memory" % o["memory"])
    if "world_size" in o:
        parts.append("%s ranks, rank 1 exports and rank 0 imports" % o["world_size"])
    return "; ".join(parts) if parts else "not recorded"


def _call_plot(bench, method, entries, out):
    """Open, close and re-open time vs buffer size of one method, log-log, band = min..max."""
    fig, ax = plotting.figure()
    for i, (key, _, label, linestyle) in enumerate(CALLS):
        colour, marker = STYLE.get(key) or plotting.style(key, i)
        points = [(e["bytes"], e[key]) for e in entries if e.get(key) is not None and e[key]["median"] > 0]
        if not points:
            ax.plot([], [], linestyle=":", color=colour, label="%s: no data" % label)
            continue
        xs = [size for size, _ in points]
        ys = [v["median"] for _, v in points]
        hollow = key == "reopen_us"
        ax.plot(xs, ys, marker=marker, markersize=7 if hollow else 4, color=colour, linestyle=linestyle,
                markerfacecolor="none" if hollow else colour, label=label)
        lows = [v.get("min") if v.get("min") else v["median"] for _, v in points]
        highs = [v.get("max") if v.get("max") else v["median"] for _, v in points]
        ax.fill_between(xs, lows, highs, color=colour, alpha=0.15, linewidth=0)
    plotting.size_axis(ax, [e["bytes"] for e in entries], "buffer size (bytes)")
    ax.set_yscale("log")
    ax.set_ylabel("time per call (us, log scale)")
    gaps = [e for e in entries if e["status"] != "ok"]
    source = "%s (%s); median of repeats, band = min..max" % (os.path.basename(bench.path), machine.date(bench.data))
    if gaps:
        source += "; %s at %s" % (gaps[0]["status"], size_words(gaps[0]["bytes"]))
    plotting.title(ax, "%s: ipc %s, open/close time vs size" % (machine.short(bench.data), method), source)
    ax.legend(fontsize=8, loc="upper left")
    path, link = out.plot_path(bench.stem, method, "time")
    plotting.save(fig, path)
    return link


def _cache_ran(cache):
    """Whether the cache step ran: its `ran` key since 2026-11-30 (with null counters and error "did not run" when it
    did not). Before, the bench wrote a step that never started (the run stopped before it) with an empty method,
    first_us null and its counters at 0 (wrong 0, ipc_opens 0), error null: nothing was measured or checked, so none
    of those zeros is a result."""
    if "ran" in cache:
        return bool(cache["ran"])
    return cache.get("first_us") is not None or bool(cache.get("method"))


def _cache_rows(cache):
    steady = cache.get("steady_us")
    first = cache.get("first_us")
    if not _cache_ran(cache):
        return [["first (maps the allocation)", "not run", "—"], ["steady state (cache hit)", "not run", "—"]]
    return [
        ["first (maps the allocation)", number(first) if first is not None else "FAILED",
         _count(cache.get("first_ipc_opens"))],
        ["steady state (cache hit)", _spread(steady) or "FAILED", _count(cache.get("steady_ipc_opens"))],
    ]


def _count(value):
    return "—" if value is None else str(value)


def _cache_wrong(cache):
    wrong = cache.get("wrong")
    if not _cache_ran(cache):
        return "Received bytes: — (not checked: the cache step did not run)."
    if wrong is None:
        return "Received bytes: not checked."
    return "Received bytes checked: %s wrong over all transfers%s." % (
        "0" if wrong == 0 else "**%d**" % wrong, "" if wrong == 0 else " (the run failed)")


def _cache_plot(bench, cache, out):
    """Two bars, first transfer vs steady-state median (whisker = min..max), log scale: they differ 100-fold."""
    first, steady = cache.get("first_us"), cache.get("steady_us")
    if first is None or not steady:
        return None
    fig, ax = plotting.figure()
    labels = ["first transfer\n(%s mapping%s opened)" % (cache.get("first_ipc_opens", "?"),
                                                       "" if cache.get("first_ipc_opens") == 1 else "s"),
              "steady state, median\n(%s mappings opened)" % cache.get("steady_ipc_opens", "?")]
    values = [first, steady["median"]]
    top = steady.get("max") or steady["median"]
    ax.bar([0, 1], values, width=0.5, color=["tab:red", "tab:blue"])
    ax.errorbar([1], [steady["median"]], yerr=[[steady["median"] - (steady.get("min") or steady["median"])],
                                               [top - steady["median"]]], fmt="none", ecolor="black", capsize=6)
    for x, v, above in ((0, first, first), (1, steady["median"], top)):
        ax.annotate("%s us" % number(v), (x, above), xytext=(0, 4), textcoords="offset points", ha="center",
                    va="bottom", fontsize=9)
    ax.set_yscale("log")
    ax.set_ylim(min(v for v in values if v > 0) / 3, max(values + [top]) * 4)
    ax.set_xticks([0, 1])
    ax.set_xticklabels(labels)
    ax.set_ylabel("receive-to-completion time (us, log scale)")
    plotting.title(ax, "%s: ipc mapping cache, %s recv (%s)" % (
        machine.short(bench.data), size_words(cache.get("bytes") or 0), cache.get("method") or "method not recorded"),
        "%s (%s); whisker = min..max of the steady transfers" % (os.path.basename(bench.path),
                                                                 machine.date(bench.data)))
    path, link = out.plot_path(bench.stem, "cache")
    plotting.save(fig, path)
    return link


def render(bench, out):
    results = bench.data["results"]
    lines = ["**Method**: %s (docs/bench.md)." % _method_line(bench)]
    lines += markdown.notes(bench.data)
    if not results:
        lines += ["", "No import measurements: the run stopped before its first buffer."]
    for method in _methods(results):
        entries = sorted((e for e in results if e["method"] == method), key=lambda e: e["bytes"])
        lines += ["", "### Import cost, %s (us per call)" % METHOD_WORDS.get(method, method), ""]
        lines += markdown.table(TABLE_HEADER, [_row(e) for e in entries])
        details = ["- %s at %s: %s: %s" % (method, size_words(e["bytes"]), e["status"], e["detail"])
                   for e in entries if e.get("detail")]
        if details:
            lines += [""] + details
        if any(e.get("open_us") or e.get("close_us") for e in entries):
            lines += ["", markdown.image("ipc %s open/close time vs buffer size" % method,
                                         _call_plot(bench, method, entries, out))]
        else:
            lines += ["", "No plot: %s has no timed import." % method]
    cache = bench.data.get("cache")
    lines += ["", "### pickle's mapping cache (first transfer vs steady state)", ""]
    if not cache:
        lines.append("Not measured in this run.")
        return lines
    if not _cache_ran(cache):
        reason = cache.get("error")
        if reason == "did not run":  # the bench's word for a step the run ended before
            reason = "the run ended before it (see the exit code and the rows above)"
        lines += ["**Not run**%s." % (": %s" % reason if reason else " (the result file gives no reason)"), ""]
    method = cache.get("method")
    lines.append("A %s Communicator send/recv into one %sallocation, timed on the receiver from `recv()` to "
                 "completion; `ipc_opens` counts the mappings both ranks opened during the transfer(s)."
                 % (size_words(cache.get("bytes") or 0), method + " " if method else ""))
    lines.append("")
    lines += markdown.table(CACHE_HEADER, _cache_rows(cache))
    lines += ["", _cache_wrong(cache)]
    if cache.get("error") and _cache_ran(cache):  # else it is the reason given under "Not run"
        lines += ["", "- cache measurement FAILED: %s" % cache["error"]]
    link = _cache_plot(bench, cache, out)
    if link:
        lines += ["", markdown.image("ipc mapping cache, first vs steady transfer", link)]
    return lines


register(Suite("ipc", check, render))
