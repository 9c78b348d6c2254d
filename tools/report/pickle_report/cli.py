"""Command line of the report generator: arguments, the matplotlib check, exit codes."""
import argparse
import os
import shutil
import sys
import tempfile

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

    from . import inputs
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

    if os.path.exists(args.output) and not os.path.isdir(args.output):
        _say("cannot create the output folder %s: it exists and is not a directory" % args.output)
        return failure
    # Everything is written into a fresh folder beside the output folder and moved into it only when the whole report
    # succeeded: a file that fails halfway leaves no stray plots, and an output folder that existed keeps its old
    # content untouched.
    try:
        staging = _staging_folder(args.output)
    except OSError as e:
        _say("cannot create the output folder %s: %s" % (args.output, e.strerror or e))
        return failure
    try:
        return _write(args, files, staging, failure)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _staging_folder(output):
    """A new empty folder, on the output folder's file system where it can (so that the files move by rename): in the
    nearest existing folder above it, or in the output folder itself where that one exists and its parent is not
    writable."""
    parent = os.path.dirname(os.path.abspath(output))
    while not os.path.isdir(parent):
        parent = os.path.dirname(parent)
    try:
        return tempfile.mkdtemp(prefix=".pickle-report-", dir=parent)
    except OSError:
        if not os.path.isdir(output):
            raise
        return tempfile.mkdtemp(prefix=".pickle-report-", dir=output)


def _write(args, files, staging, failure):
    """Renders every input into `staging`, then moves report.md and the plots into args.output."""
    from . import document
    from .output import Output

    out = Output(staging)
    try:
        lines = document.header(files)
    except (KeyError, TypeError, ValueError, IndexError) as e:  # the header names every file's machine
        _say("cannot report %s: %s: %s" % (", ".join(b.path for b in files), type(e).__name__, e))
        return failure
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
        with open(os.path.join(staging, "report.md"), "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
    except OSError as e:
        _say("cannot write %s: %s" % (report, e.strerror or e))
        return failure
    try:
        os.makedirs(args.output, exist_ok=True)
    except OSError as e:
        _say("cannot create the output folder %s: %s" % (args.output, e.strerror or e))
        return failure
    try:
        # A rename, or a copy where the output folder is a link to another file system; report.md last: it links
        # the plots.
        for name in list(dict.fromkeys(out.plots)) + ["report.md"]:
            shutil.move(os.path.join(staging, name), os.path.join(args.output, name))
    except OSError as e:
        _say("cannot move the report into %s: %s" % (args.output, e.strerror or e))
        return failure
    print("pickle report: wrote %s and %d plot%s" % (report, len(out.plots), "" if len(out.plots) == 1 else "s"))
    return 0
