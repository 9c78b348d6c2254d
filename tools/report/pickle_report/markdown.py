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
