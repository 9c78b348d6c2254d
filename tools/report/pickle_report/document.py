"""report.md: one section per input file (its recorded environment, then its suite's tables and plots)."""

from . import machine, markdown
from .suites import known, lookup


def header(files):
    lines = ["# pickle benchmark report", "",
             "Made by `pickle report` from %d result file%s of `pickle bench --json` (schema pickle-bench/1). "
             "Ratios are pickle's speed-up over the named backend (above 1: pickle faster); "
             "`n/a` marks an unavailable backend, `FAILED` a failed measurement, `skipped` the sizes after a "
             "backend failed." % (len(files), "" if len(files) == 1 else "s"), ""]
    for bench in files:
        lines.append("- %s: %s on %s, %s" % (markdown.code(bench.path), bench.suite, machine.short(bench.data),
                                             machine.date(bench.data)))
    return lines


def _exit_code_line(data):
    exit_code = data.get("exit_code")
    if exit_code is None:
        return "not recorded"
    broken = data.get("broken_run")
    if broken:  # a rank stopped or died: what was measured before is here, the rest is not
        return "%s (the run ended early: %s)" % (exit_code, broken)
    return "%s%s" % (exit_code, "" if exit_code == 0 else " (the run failed)")


def environment(bench):
    data = bench.data
    return [
        "- **File**: %s" % markdown.code(bench.path),
        "- **Command**: %s" % markdown.code(machine.command_line(data)),
        "- **Date**: %s" % machine.date(data),
        "- **Machine**: %s" % machine.machine_line(data),
        "- **Versions**: %s" % machine.versions_line(data),
        "- **Environment**: %s" % machine.environment_line(data),
        "- **Exit code of the run**: %s" % _exit_code_line(data),
    ]


def section(bench, out, warn):
    """The Markdown of one input; a suite nobody registered is named, not fatal."""
    lines = ["", "## %s: %s on %s" % (bench.name, bench.suite, machine.short(bench.data)), ""]
    lines += environment(bench)
    lines.append("")
    suite = lookup(bench.suite)
    if suite is None:
        message = ("suite '%s' is not known to this report generator (it knows: %s); its results are not shown"
                   % (bench.suite, ", ".join(known())))
        warn("%s: %s" % (bench.path, message))
        lines.append("**Not reported**: %s." % message)
        return lines
    return lines + suite.render(bench, out)
