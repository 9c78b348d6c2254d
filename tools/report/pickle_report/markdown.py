"""Markdown building blocks."""


def table(header, rows):
    """A pipe table; cells are already strings. Pipes inside cells are escaped so that they cannot split a row."""
    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    out = [line(header), "|" + "|".join("---" for _ in header) + "|"]
    out.extend(line(row) for row in rows)
    return out


def image(alt, relative_path):
    return "![%s](%s)" % (alt.replace("]", ")"), relative_path)


def code(text):
    """Inline code that survives backticks in the text."""
    fence = "``" if "`" in text else "`"
    return "%s%s%s" % (fence, text, fence)


def notes(data):
    """The run's notes as a list after a blank line, or nothing when it has none."""
    items = data.get("notes") or []
    return ["", "**Notes**:"] + ["- %s" % n for n in items] if items else []


def backend_lines(backends, status, display, wrong=None):
    """One list line per backend: its display name, **status** and the detail when there is one. A backend with rows
    of wrong data (`wrong`: {backend: (rows, #wrong summed)}) reads **WRONG DATA** whatever its recorded status: the
    bench records `ok` for a backend that ran to the end, even when its check found wrong bytes."""
    lines = []
    for b in backends:
        state, detail = status.get(b, ("not recorded", ""))
        count, total = (wrong or {}).get(b, (0, 0))
        if count:
            lines.append("- %s: **WRONG DATA** in %s (#wrong %d in all; recorded status **%s**%s)"
                         % (display(b), rows(count), total, state, (": " + detail) if detail else ""))
            continue
        lines.append("- %s: **%s**%s" % (display(b), state, (": " + detail) if detail else ""))
    return lines


def rows(n):
    """'1 row', '3 rows'."""
    return "%d row%s" % (n, "" if n == 1 else "s")


def count_wrong(items):
    """{backend: (rows, #wrong summed)} over (backend, wrong) pairs, for the backends with a row of wrong data."""
    found = {}
    for backend, wrong in items:
        if is_wrong(wrong):
            count, total = found.get(backend, (0, 0))
            found[backend] = (count + 1, total + wrong)
    return found


def count_cell(wrong, absent):
    """A #wrong table cell: `absent` when not checked (None), **N** in bold when the check failed, else 0."""
    if wrong is None:
        return absent
    return "**%d**" % wrong if is_wrong(wrong) else "0"


def is_wrong(wrong):
    """A #wrong that says the data check failed (None: not checked)."""
    return isinstance(wrong, int) and not isinstance(wrong, bool) and wrong > 0


class CheckedPoint:
    """`wrong_data` and `good` of a measured point, for a class that has `ok` (measured: the table shows its figures)
    and `wrong` (its #wrong)."""

    @property
    def wrong_data(self):
        """Measured, but its data check failed: its figures are no result."""
        return self.ok and is_wrong(self.wrong)

    @property
    def good(self):
        """A result: measured and not wrong. Only these are drawn as lines and bars and enter ratios and averages."""
        return self.ok and not is_wrong(self.wrong)


def wrong_data_lines(wrong, display, left_out="the plots, speed-up ratios and averages"):
    """A prominent paragraph for the top of a section when rows carry wrong data ({backend: (rows, #wrong)}), or
    nothing: their figures stay in the tables, with #wrong in bold, but are no results (left out of `left_out`)."""
    if not wrong:
        return []
    named = "; ".join("%s: %s (#wrong %d in all)" % (display(b), rows(count), total)
                      for b, (count, total) in wrong.items())
    return ["**WRONG DATA**: the data check failed in %s. Those rows stay in the tables (their #wrong in bold) but are "
            "no results%s." % (named, "; they are left out of " + left_out if left_out else ""), ""]


def absent_cell(state):
    """The table cell of a backend with no measurement at a size, by its status."""
    if state == "unavailable":
        return "n/a"
    if state == "failed":
        return "skipped"
    return "not run"


def wrong_cell(checked, display):
    """The #wrong cell from (backend, wrong bytes) of every checked backend: "0", or the non-zero ones in bold."""
    bad = [(b, w) for b, w in checked if w != 0]
    if not bad:
        return "0"
    return "**" + ", ".join("%s: %d" % (display(b), w) for b, w in bad) + "**"
