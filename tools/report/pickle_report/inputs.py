"""Reading result files: every problem with an input becomes an InputError that names the file."""
import json
import math
import os
import re

SCHEMA_PREFIX = "pickle-bench/"
SUPPORTED_SCHEMA = "pickle-bench/1"


class InputError(Exception):
    """An input file that cannot be used; the message starts with the file's name."""


class BenchFile:
    """One result file: its path as given, the parsed JSON, and a short unique name (`stem`) for output files."""

    def __init__(self, path, data, stem):
        self.path = path
        self.data = data
        self.stem = stem
        self.name = os.path.basename(path)  # for headings; load() lengthens it where two inputs share it

    @property
    def suite(self):
        return self.data["suite"]

    def fail(self, why):
        """An InputError about this file."""
        return InputError("%s: %s" % (self.path, why))


def _stem(path, taken):
    base = os.path.basename(path)
    if base.endswith(".json"):
        base = base[: -len(".json")]
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", base) or "input"
    stem, n = base, 2
    while stem in taken:  # two inputs of the same name from different folders
        stem = "%s-%d" % (base, n)
        n += 1
    taken.add(stem)
    return stem


def _refuse_constant(name):
    # Python's json reads NaN and Infinity, which JSON does not have and `pickle bench` never writes (a number it
    # cannot give is null): a file that holds one was made or edited elsewhere, and its tables would say "nan".
    raise ValueError("%s is not a JSON number" % name)


def _finite_float(text):
    value = float(text)
    if math.isinf(value):  # 1e999: a number JSON allows, which no double holds
        raise ValueError("%s is beyond what a double holds" % text)
    return value


def load(paths):
    """Parses every file and checks the keys common to all suites. Raises InputError at the first bad file."""
    files, taken = [], set()
    for path in paths:
        try:
            with open(path, "r", encoding="utf-8") as handle:
                data = json.load(handle, parse_constant=_refuse_constant, parse_float=_finite_float)
        except OSError as e:
            raise InputError("%s: cannot read: %s" % (path, e.strerror or e))
        except (ValueError, UnicodeDecodeError) as e:
            raise InputError("%s: not valid JSON: %s" % (path, e))
        if not isinstance(data, dict):
            raise InputError("%s: not a pickle bench result (the top level is not a JSON object)" % path)
        schema = data.get("schema")
        if not isinstance(schema, str) or not schema.startswith(SCHEMA_PREFIX):
            raise InputError("%s: not a pickle bench result (schema %r; expected %r from `pickle bench --json`)"
                             % (path, schema, SUPPORTED_SCHEMA))
        if schema != SUPPORTED_SCHEMA:
            raise InputError("%s: schema %r is newer than this report generator understands (%r)"
                             % (path, schema, SUPPORTED_SCHEMA))
        if not isinstance(data.get("suite"), str) or not data["suite"]:
            raise InputError("%s: the key 'suite' is missing or not a string" % path)
        # Keys every suite's section reads: a wrong type here would fail halfway through the report with a bare
        # "TypeError: 'int' object is not iterable" that names no key.
        for key, kind, words in (("environment", dict, "an object"), ("options", dict, "an object"),
                                 ("notes", list, "a list")):
            if data.get(key) is not None and not isinstance(data[key], kind):
                raise InputError("%s: the key '%s' is not %s (it is %s)" % (path, key, words, _json_type(data[key])))
        files.append(BenchFile(path, data, _stem(path, taken)))
    # Inputs of one name from different folders (call1/coll.json, call4/coll.json) are headed by their paths as given.
    names = [bench.name for bench in files]
    for bench in files:
        if names.count(bench.name) > 1:
            bench.name = os.path.normpath(bench.path)
    return files


def require(bench, obj, key, kinds, where):
    """obj[key] with a type check; raises an InputError naming the file and the JSON location otherwise."""
    if not isinstance(obj, dict) or key not in obj:
        raise bench.fail("%s lacks the key %r" % (where, key))
    value = obj[key]
    if not isinstance(value, kinds) or isinstance(value, bool) and bool not in _as_tuple(kinds):
        raise bench.fail("%s.%s has the wrong type (%s)" % (where, key, type(value).__name__))
    return value


def is_number(value):
    """A JSON number: Python's bool is an int, but true is not a number here."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_optional_nonnegative(bench, entry, keys, where):
    """Each of `keys` in `entry` is absent, null, or a number that is not negative."""
    for key in keys:
        value = entry.get(key)
        if value is not None and not is_number(value):
            raise bench.fail("%s.%s is not a number" % (where, key))
        if is_number(value) and value < 0:
            raise bench.fail("%s.%s is %r; it cannot be negative" % (where, key, value))


def check_summary(bench, value, where):
    """A {median, min, max} of a measurement, when present: a positive median, numeric bounds."""
    if value is None:
        return
    median = require(bench, value, "median", (int, float), where)
    if median <= 0:
        raise bench.fail("%s.median is %r; it must be positive" % (where, median))
    for bound in ("min", "max"):
        if value.get(bound) is not None and not isinstance(value[bound], (int, float)):
            raise bench.fail("%s.%s is not a number" % (where, bound))


def check_count(bench, obj, key, where):
    """obj[key], when present, is a whole number (a count such as #wrong)."""
    value = obj.get(key)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
        raise bench.fail("%s.%s is not an integer" % (where, key))


def check_backends_and_options(bench):
    """The 'backends' list ({name, status, ...} each) and the 'options' object of a suite of several backends."""
    backends = bench.data.get("backends", [])
    if not isinstance(backends, list):
        raise bench.fail("'backends' is not a list")
    for i, backend in enumerate(backends):
        require(bench, backend, "name", str, "backends[%d]" % i)
        require(bench, backend, "status", str, "backends[%d]" % i)
    if not isinstance(bench.data.get("options", {}), dict):
        raise bench.fail("'options' is not an object")


def backend_status(data):
    """{backend name: (status, detail)} of a result file's 'backends'."""
    return {b["name"]: (b["status"], b.get("detail") or "") for b in data.get("backends", [])}


def ordered(preferred, seen):
    """The strings of `preferred` (the order the run was asked for), then those of `seen` not among them yet."""
    order = [x for x in (preferred or []) if isinstance(x, str)]
    for x in seen:
        if x not in order:
            order.append(x)
    return order


def _json_type(value):
    """The JSON name of a parsed value's type, for messages."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else type(value).__name__


def _as_tuple(kinds):
    return kinds if isinstance(kinds, tuple) else (kinds,)
