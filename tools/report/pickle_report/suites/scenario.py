"""`pickle bench scenario`: seed 004's three tools, one table per file with a row per backend (seeds 003's tp-pp and
002's switchml: scenario_seeds.py).

allreduce-bench: the seed's average algbw and busbw in GB/s and Gbps; flags: all_gather_object vs one-element
all_reduce per call, and their ratio (the seed saw 23x); one-vs-many: one big allreduce vs many small ones of the
same total, and their ratio."""
from .. import markdown
from ..inputs import require
from ..units import number, ratio
from .registry import Suite, register
from . import scenario_seeds

DISPLAY = {"pickle": "pickle", "nccl": "NCCL", "switch": "software switch"}
KNOWN = ("allreduce-bench", "flags", "one-vs-many", "tp-pp", "switchml")


def display(name):
    return DISPLAY.get(name, name)


def decimal_size(nbytes):
    """Sizes as the seed prints them: decimal units (its "4GB" payload is 4e9 bytes)."""
    for unit, word in ((1e9, "GB"), (1e6, "MB"), (1e3, "KB")):
        if nbytes >= unit:
            return "%.1f %s" % (nbytes / unit, word)
    return "%d B" % nbytes


def check(bench):
    name = require(bench, bench.data, "scenario", str, "the file")
    if name not in KNOWN:
        raise bench.fail("scenario %r is not one of %s" % (name, ", ".join(KNOWN)))
    results = require(bench, bench.data, "results", list, "the file")
    for i, entry in enumerate(results):
        where = "results[%d]" % i
        require(bench, entry, "backend", str, where)
        if entry.get("error") is not None:
            continue
        if name == "allreduce-bench":
            require(bench, entry, "bytes", int, where)
            require(bench, entry, "algbw_gbps", dict, where)
            require(bench, entry, "busbw_gbps", dict, where)
        elif name == "tp-pp":
            scenario_seeds.check_tp_pp(bench, entry, where)
        elif name == "switchml":
            scenario_seeds.check_switchml(bench, entry, where)
        elif name == "flags":
            require(bench, entry, "gather_object", dict, where)
            require(bench, entry, "allreduce", dict, where)
            require(bench, entry, "ratio", (int, float), where)
        else:
            require(bench, entry, "one", dict, where)
            require(bench, entry, "many", dict, where)
            require(bench, entry, "ratio", (int, float), where)
    if not isinstance(bench.data.get("backends", []), list):
        raise bench.fail("'backends' is not a list")


def _wrong(entry):
    return markdown.count_cell(entry.get("wrong"), "N/A")


def _rows(name, results):
    rows = []
    for r in results:
        backend = display(r["backend"])
        if r.get("error") is not None:
            rows.append([backend, "FAILED: %s" % r["error"]])
            continue
        if name == "allreduce-bench":
            alg, bus = r["algbw_gbps"].get("mean"), r["busbw_gbps"].get("mean")
            rows.append([backend, decimal_size(r["bytes"]), str(len(r.get("trials") or [])), number(alg),
                         number(alg * 8 if alg is not None else None), number(bus),
                         number(bus * 8 if bus is not None else None), _wrong(r)])
        elif name == "flags":
            rows.append([backend, number(r["gather_object"].get("per_call_us")),
                         number(r["allreduce"].get("per_call_us")), ratio(r["ratio"]), _wrong(r)])
        else:
            one, many = r["one"], r["many"]
            one_ms = (one.get("time_us") or {}).get("median")
            many_ms = (many.get("time_us") or {}).get("median")
            rows.append(["%s" % backend, number(one_ms / 1e3 if one_ms is not None else None),
                         number(many_ms / 1e3 if many_ms is not None else None), ratio(r["ratio"]),
                         number(one.get("busbw_gbps")), number(many.get("busbw_gbps")), _wrong(r)])
    return rows


def _header(name, options):
    if name == "allreduce-bench":
        return ["Backend", "Payload", "Trials", "algbw GB/s", "algbw Gbps", "busbw GB/s", "busbw Gbps", "#wrong"]
    if name == "flags":
        return ["Backend", "all_gather_object us/call", "all_reduce us/call", "ratio", "#wrong"]
    count = options.get("count", "N")
    small = decimal_size(options["small_bytes"]) if isinstance(options.get("small_bytes"), int) else "small"
    big = decimal_size(options["bytes"]) if isinstance(options.get("bytes"), int) else "big"
    return ["Backend", "1 x %s ms" % big, "%s x %s ms" % (count, small), "many/one", "busbw one GB/s",
            "busbw many GB/s", "#wrong"]


WORDS = {
    "allreduce-bench": "one in-place float allreduce of the payload per trial (all_reduce_bench.py); the means "
                       "over the trials, slowest rank per trial",
    "flags": "all_gather_object (a length allgather, then the padded bytes, read back and deserialized) vs a "
             "one-element allreduce read back, per call (all_gather_object_vs_all_reduce.py; the seed saw 23x)",
    "one-vs-many": "one allreduce of the whole payload vs many of a fraction of it, back to back "
                   "(all_reduce_latency_comp.py); median of the repeats",
    "tp-pp": "seed 003's tensor- and pipeline-parallel overhead of LLM inference on two ranks, on a proxy of a Llama-2 "
             "forward pass (each layer's four projections, bf16): TP=1 on one rank, TP=2 without and with its "
             "allreduces, PP=2 with its stage transfers, for prefill and decode rows; mean of the passes, slowest rank",
    "switchml": "seed 002's in-network aggregation: SwitchML's protocol on pickle's software switch (a thread of "
                "rank 0, UDP) against pickle's and NCCL's allreduce, jobs of one int32 sum each, summarized as "
                "SwitchML's allreduce_benchmark does",
}


def render(bench, out):
    name = bench.data["scenario"]
    options = bench.data.get("options") or {}
    results = bench.data["results"]
    # The bench records `ok` for a backend whose check found wrong data; its means and ratio are then no result.
    wrong = markdown.count_wrong((r["backend"], r.get("wrong")) for r in results if r.get("error") is None)
    lines = markdown.wrong_data_lines(wrong, display, None)
    lines += ["**Scenario** `%s`: %s (docs/bench.md)." % (name, WORDS[name]), "", "**Backends**:"]
    backends = [b["name"] for b in bench.data.get("backends", [])]
    status = {b["name"]: (b["status"], b.get("detail") or "") for b in bench.data.get("backends", [])}
    lines += markdown.backend_lines(backends, status, display, wrong)
    lines += markdown.notes(bench.data)
    lines.append("")
    if not results:
        lines.append("No measurements: every backend was unavailable or failed.")
        return lines
    if name == "tp-pp":
        return (lines + scenario_seeds.tp_pp_tables(bench, results, display)
                + scenario_seeds.tp_pp_plot(bench, results, out, display))
    if name == "switchml":
        return (lines + scenario_seeds.switchml_tables(bench, results, display)
                + scenario_seeds.switchml_plot(bench, results, out, display))
    header = _header(name, options)
    rows = [row + [""] * (len(header) - len(row)) for row in _rows(name, results)]
    return lines + markdown.table(header, rows)


register(Suite("scenario", check, render))
