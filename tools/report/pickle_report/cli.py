"""Command line of the report generator: arguments, the matplotlib check, exit codes."""
import argparse
import os
import sys

USAGE_ERROR = 2
FAILURE = 1


def _parser():
    parser = argparse.ArgumentParser(
        prog="pickle report",
        description="Plots and a Markdown report (DIR/report.md) from `pickle bench --json` result files.")
    parser.add_argument("-o", "--output", metavar="DIR", default="report",
                        help="folder for report.md and the PNG plots (created; default: report)")
    parser.add_argument("files", nargs="*", metavar="FILE", help="result files written by `pickle bench --json`")
    # Set by the `pickle` command while it looks for a Python that has matplotlib: exit with this status, silently,
    # when this one has not, so that the next candidate can be tried.
    parser.add_argument("--missing-matplotlib-status", type=int, default=None, help=argparse.SUPPRESS)
    # Set by the `pickle` command: exit with this status rather than 1 when the failure has been said here, so that
    # the command adds no line of its own (it still does for a Python that failed without a word).
    parser.add_argument("--said-failure-status", type=int, default=None, help=argparse.SUPPRESS)
    return parser


def _say(message):
    sys.stderr.write("pickle report: %s\n" % message)


def main(argv):
    parser = _parser()
    args = parser.parse_args(argv)  # exits 2 on a bad command line
    failure = FAILURE if args.said_failure_status is None else args.said_failure_status
    try:
        import matplotlib  # noqa: F401
    except ImportError as e:
        if args.missing_matplotlib_status is not None:
            return args.missing_matplotlib_status
        _say("%s cannot import matplotlib (%s): apt-get install python3-matplotlib" % (sys.executable, e))
        return failure
    if not args.files:
        parser.print_usage(sys.stderr)
        _say("no input files: give one or more result files of `pickle bench --json`")
        return USAGE_ERROR

    from . import document, inputs
    from .output import Output
    from .suites import lookup

    try:
        files = inputs.load(args.files)
        for bench in files:
            suite = lookup(bench.suite)
            if suite is not None:
                suite.check(bench)
    except inputs.InputError as e:
        _say(str(e))
        return failure

    try:
        os.makedirs(args.output, exist_ok=True)
    except OSError as e:
        _say("cannot create the output folder %s: %s" % (args.output, e.strerror or e))
        return failure
    out = Output(args.output)
    lines = document.header(files)
    for bench in files:
        try:
            lines += document.section(bench, out, _say)
        except (KeyError, TypeError, ValueError, IndexError) as e:
            _say("%s: cannot report this file: %s: %s" % (bench.path, type(e).__name__, e))
            return failure
        except OSError as e:
            _say("%s: cannot write its plots to %s: %s" % (bench.path, args.output, e))
            return failure
    report = os.path.join(args.output, "report.md")
    try:
        with open(report, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
    except OSError as e:
        _say("cannot write %s: %s" % (report, e.strerror or e))
        return failure
    print("pickle report: wrote %s and %d plot%s" % (report, len(out.plots), "" if len(out.plots) == 1 else "s"))
    return 0
