"""Suites by name. A suite module registers one Suite; the report handles files of unregistered suites by naming
them instead of failing, so that new `pickle bench` suites never break reports of the old ones."""


class Suite:
    """What a suite module provides.

    check(bench): raises inputs.InputError (via bench.fail) when the file's suite-specific keys are unusable;
    called for every input before any output is written.
    render(bench, out): writes the suite's plots through `out` and returns the Markdown lines of its section.
    """

    def __init__(self, name, check, render):
        self.name = name
        self.check = check
        self.render = render


_SUITES = {}


def register(suite):
    if suite.name in _SUITES:
        raise ValueError("suite %r registered twice" % suite.name)
    _SUITES[suite.name] = suite
    return suite


def lookup(name):
    """The Suite of that name, or None."""
    return _SUITES.get(name)


def known():
    return sorted(_SUITES)
