"""Size and number formatting shared by tables and plots."""

_UNITS = [(1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")]


def size_label(nbytes):
    """Short binary size for axis ticks, rounded: 4096 -> '4K', 1 << 30 -> '1G', 1536 -> '1.5K', 100 -> '100',
    1048572 -> '1024K' (never exponent notation)."""
    for unit, suffix in _UNITS:
        if nbytes >= unit:
            if nbytes % unit == 0:
                return "%d%s" % (nbytes // unit, suffix)
            scaled = nbytes / unit
            return ("%.0f%s" if scaled >= 100 else "%.3g%s") % (scaled, suffix)
    return "%d" % nbytes


def size_words(nbytes):
    """Exact size for tables, in the seeds' style: 4096 -> '4 KiB', 1 << 30 -> '1 GiB', 1536 -> '1.5 KiB',
    100 -> '100 B'. A size that no unit writes exactly in three digits (nccl-tests' sizes on 3 ranks: 65532) is
    written in bytes, so that no two sizes of a table read the same."""
    for unit, suffix in _UNITS:
        if nbytes >= unit:
            value = nbytes / unit
            scaled = "%d" % value if value == int(value) else "%.3g" % value
            if float(scaled) * unit == nbytes:
                return "%s %siB" % (scaled, suffix)
            break
    return "%d B" % nbytes


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
