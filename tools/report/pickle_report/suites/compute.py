"""`pickle bench compute`: interference's foregrounds (GEMM, attention) timed alone on one GPU.

One table, a row per foreground: which kernel computed it (cuBLASLt, cuDNN SDPA or pickle's own attention kernel),
ms per iteration (median of the repeats, with min..max), TFLOP/s from the median, and the check: the comparison with
a simple reference kernel and the output elements that changed from the foreground's first result."""
from .. import markdown
from ..inputs import check_optional_nonnegative, is_number, require
from ..units import number
from . import interference
from .registry import Suite, register

TABLE_HEADER = ["foreground", "kernel", "ms", "TFLOP/s", "check"]
CLOCK_HEADER = ["SM clock (MHz)", "power (W)", "at the power cap"]


def check(bench):
    data = bench.data
    results = require(bench, data, "results", list, "the file")
    for i, entry in enumerate(results):
        where = "results[%d]" % i
        for key in ("name", "status"):
            require(bench, entry, key, str, where)
        check_optional_nonnegative(bench, entry, ("ms", "min_ms", "max_ms", "tflops", "flops"), where)
        changed = entry.get("changed")
        if changed is not None and (not isinstance(changed, int) or isinstance(changed, bool)):
            raise bench.fail("%s.changed is not an integer" % where)
        verify = entry.get("verify")
        if verify is not None and not isinstance(verify, dict):
            raise bench.fail("%s.verify is not an object" % where)
        if entry.get("error") is not None and not isinstance(entry["error"], str):
            raise bench.fail("%s.error is not a string" % where)
        interference.check_telemetry(bench, entry.get("telemetry"), where + ".telemetry")
        loaded = entry.get("copy_load")
        if loaded is not None:
            if not isinstance(loaded, dict):
                raise bench.fail("%s.copy_load is not an object" % where)
            for key in ("ms", "min_ms", "max_ms", "relative", "copy_gbps"):
                if not is_number(loaded.get(key)) or loaded[key] < 0:
                    raise bench.fail("%s.copy_load.%s is %r; expected a non-negative number" % (
                        where, key, loaded.get(key)))
            interference.check_telemetry(bench, loaded.get("telemetry"), where + ".copy_load.telemetry")
    if not isinstance(data.get("options", {}), dict):
        raise bench.fail("'options' is not an object")
    waived = data.get("waived")
    if waived is not None and not isinstance(waived, str):
        raise bench.fail("'waived' is not a string")


def _method(data):
    o = data.get("options") or {}
    parts = ["each foreground alone on GPU %s%s" % (o.get("device", "?"),
                                                    " (%s)" % data["device_name"] if data.get("device_name") else "")]
    if "iterations" in o:
        parts.append("%s warm-up iterations (and at least %s ms), then %s repeats of %s iterations between CUDA "
                     "events; the median repeat is shown with min..max" % (
                         o.get("warmup", "?"), o.get("warmup_ms", "?"), o.get("repeats", "?"), o["iterations"]))
    if "attention" in o:
        parts.append("attention implementation: %s" % o["attention"])
    return "; ".join(parts)


def _check_cell(entry):
    if entry.get("status") != "ok":
        return "**%s**: %s" % (entry.get("status"), entry.get("detail") or "—")
    if entry.get("error"):
        return "**FAILED**: %s" % entry["error"]
    parts = []
    verify = entry.get("verify")
    if isinstance(verify, dict) and is_number(verify.get("max_error")):
        parts.append("max error %.2e (tolerance %.0e)" % (verify["max_error"], verify.get("tolerance") or 0))
    changed = entry.get("changed")
    if changed is not None:
        parts.append("%d changed" % changed if changed == 0 else "**%d changed**" % changed)
    verdict = "passed" if entry.get("passed") else "**failed**"
    return "%s (%s)" % (verdict, ", ".join(parts)) if parts else verdict


def _ms_cell(entry):
    if not is_number(entry.get("ms")):
        return "—"
    text = number(entry["ms"])
    if is_number(entry.get("min_ms")) and is_number(entry.get("max_ms")):
        text += " [%s..%s]" % (number(entry["min_ms"]), number(entry["max_ms"]))
    return text


def _clock_cells(entry):
    """The GPU's mean SM clock and power over the timed repeats, and the share of readings held by the power cap
    (files from before the telemetry, or without NVML: dashes)."""
    t = entry.get("telemetry")
    if not t or not t.get("samples"):
        return ["—"] * len(CLOCK_HEADER)
    return ["%.0f" % t["sm_mhz"], "%.0f" % t["power_w"], "%.0f%% of %d readings" % (t["power_capped"] * 100,
                                                                                   t["samples"])]


LOAD_HEADER = ["foreground", "ms alone", "ms under the copy load", "relative", "copy load (GB/s)",
               "SM clock alone -> loaded"]


def _load_table(data):
    """--copy-load: each foreground alone and beside device-to-device copies inside its GPU (the rate asked and the
    rate reached: beside a kernel that holds the SMs such copies fall short), with the GPU's clock in both."""
    rows = []
    for entry in data["results"]:
        loaded = entry.get("copy_load")
        if not loaded or not is_number(entry.get("ms")):
            continue
        clock = interference.clock_cell(entry.get("telemetry"), loaded.get("telemetry"))
        rows.append([entry["name"], number(entry["ms"]), "%s [%s..%s]" % (
            number(loaded["ms"]), number(loaded["min_ms"]), number(loaded["max_ms"])), "%.3f" % loaded["relative"],
            number(loaded["copy_gbps"]), clock])
    if not rows:
        return []
    rate = (data.get("options") or {}).get("copy_load_gbps")
    return (["", "Under a copy load of %s GB/s asked (device-to-device copies on a stream of their own; relative = "
                 "ms alone / ms under the load):" % (number(rate) if is_number(rate) else "?"), ""] +
            markdown.table(LOAD_HEADER, rows))


def render(bench, out):
    data = bench.data
    if data.get("waived"):
        return ["**Waived**: %s; nothing was measured." % data["waived"]] + markdown.notes(data)
    lines = ["**Method**: %s (docs/bench.md)." % _method(data)]
    lines += markdown.notes(data)
    rows = []
    details = []
    sampled = any((entry.get("telemetry") or {}).get("samples") for entry in data["results"])
    for entry in data["results"]:
        rows.append([entry["name"], entry.get("kernel") or "—", _ms_cell(entry),
                     number(entry["tflops"]) if is_number(entry.get("tflops")) else "—", _check_cell(entry)] +
                    (_clock_cells(entry) if sampled else []))
        if entry.get("description") or entry.get("detail"):
            details.append("- %s: %s%s" % (entry["name"], entry.get("description") or "",
                                           " (%s)" % entry["detail"] if entry.get("detail") else ""))
    if not rows:
        return lines + ["", "No foreground was run."]
    lines += [""] + markdown.table(TABLE_HEADER + (CLOCK_HEADER if sampled else []), rows)
    if sampled and data.get("telemetry_source"):
        lines += ["", "GPU telemetry: %s." % data["telemetry_source"]]
    lines += _load_table(data)
    if details:
        lines += ["", "**Foregrounds**:"] + details
    return lines


register(Suite("compute", check, render))
