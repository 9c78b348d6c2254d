"""Reading result files: every problem with an input becomes an InputError that names the file."""
import json
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


def load(paths):
    """Parses every file and checks the keys common to all suites. Raises InputError at the first bad file."""
    files, taken = [], set()
    for path in paths:
        try:
            with open(path, "r", encoding="utf-8") as handle:
                data = json.load(handle)
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
        files.append(BenchFile(path, data, _stem(path, taken)))
    return files


def require(bench, obj, key, kinds, where):
    """obj[key] with a type check; raises an InputError naming the file and the JSON location otherwise."""
    if not isinstance(obj, dict) or key not in obj:
        raise bench.fail("%s lacks the key %r" % (where, key))
    value = obj[key]
    if not isinstance(value, kinds) or isinstance(value, bool) and bool not in _as_tuple(kinds):
        raise bench.fail("%s.%s has the wrong type (%s)" % (where, key, type(value).__name__))
    return value


def _as_tuple(kinds):
    return kinds if isinstance(kinds, tuple) else (kinds,)
