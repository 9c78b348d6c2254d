"""Size and number formatting shared by tables and plots."""

_UNITS = [(1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")]


def size_label(nbytes):
    """Short binary size for axis ticks: 4096 -> '4K', 1 << 30 -> '1G', 1536 -> '1.5K', 100 -> '100'."""
    for unit, suffix in _UNITS:
        if nbytes >= unit:
            if nbytes % unit == 0:
                return "%d%s" % (nbytes // unit, suffix)
            return "%.3g%s" % (nbytes / unit, suffix)
    return "%d" % nbytes


def size_words(nbytes):
    """Binary size for tables, in the seeds' style: 4096 -> '4 KiB', 1 << 30 -> '1 GiB', 100 -> '100 B'."""
    label = size_label(nbytes)
    if label[-1].isalpha():
        return label[:-1] + " " + label[-1] + "iB"
    return label + " B"


def number(value):
    """A measurement with about three significant digits, never in exponent notation for the ranges we see."""
    if value is None:
        return "—"
    magnitude = abs(value)
    if magnitude >= 100:
        return "%.1f" % value
    if magnitude >= 1:
        return "%.2f" % value
    if magnitude >= 0.001:
        return "%.3f" % value
    return "%.2e" % value


def ratio(value):
    """A speed-up: two decimals; below 0.1 two significant digits, so that a small ratio (a loaded 2-core machine's
    host-memory run can give 0.003) never reads as 0.00."""
    if value is None:
        return "—"
    if value != 0 and abs(value) < 0.1:
        return "%.2g" % value
    return "%.2f" % value
