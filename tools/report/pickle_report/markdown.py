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


def backend_lines(backends, status, display):
    """One list line per backend: its display name, **status** and the detail when there is one."""
    lines = []
    for b in backends:
        state, detail = status.get(b, ("not recorded", ""))
        lines.append("- %s: **%s**%s" % (display(b), state, (": " + detail) if detail else ""))
    return lines


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
