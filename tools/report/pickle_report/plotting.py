"""matplotlib with the Agg backend (no display needed) and the figure conventions every suite shares:
log2 size axis labelled 4K, 1M, 1G; a two-part title (machine, suite, mode / source file), each part wrapped when
long; small PNGs."""
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, NullLocator  # noqa: E402

from .units import size_label  # noqa: E402

DPI = 100
FIGSIZE = (7.5, 4.2)
# One colour and marker per backend name, stable across every plot of a report.
_STYLE = {
    "pickle": ("tab:blue", "o"),
    "nccl": ("tab:orange", "s"),
    "nccl-zero": ("tab:red", "v"),
    "ce": ("tab:green", "^"),
}
_FALLBACK = [("tab:purple", "D"), ("tab:brown", "P"), ("tab:pink", "X"), ("tab:gray", "*"), ("tab:olive", "h")]


def style(name, index):
    """(colour, marker) for a backend; unknown names get distinct fallbacks by position."""
    return _STYLE.get(name, _FALLBACK[index % len(_FALLBACK)])


def figure():
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    ax.grid(True, which="major", alpha=0.3)
    return fig, ax


def size_axis(ax, sizes, label="message size (bytes)"):
    """Log2 x axis whose ticks are the measured sizes, labelled 4K, 16K, ...; thinned when there are many."""
    ax.set_xscale("log", base=2)
    ticks = sorted(set(sizes))
    step = max(1, (len(ticks) + 13) // 14)
    shown = ticks[::step]
    ax.xaxis.set_major_locator(FixedLocator(shown))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([size_label(s) for s in shown])
    ax.set_xlabel(label)


# Characters of a title line at fontsize 10 (about 7.6 px each) that fit a 750 px wide figure with a margin;
# longer lines are wrapped at spaces. A run made with PICKLE_* settings has them in the headline (machine.short),
# which made it wider than the figure, and matplotlib cuts a title off rather than wrapping it.
TITLE_WIDTH = 82


def _wrap(line):
    """`line` in as few lines of at most TITLE_WIDTH characters as it needs, of about equal length (no lone word on
    the last one)."""
    if len(line) <= TITLE_WIDTH:
        return line
    count = len(textwrap.wrap(line, TITLE_WIDTH, break_long_words=False, break_on_hyphens=False))
    for width in range(-(-len(line) // count), TITLE_WIDTH + 1):
        parts = textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False)
        if len(parts) <= count:
            return "\n".join(parts)
    return textwrap.fill(line, TITLE_WIDTH, break_long_words=False, break_on_hyphens=False)


def title(ax, headline, source):
    ax.set_title("%s\n%s" % (_wrap(headline), _wrap(source)), fontsize=10)


# Points whose data check failed (#wrong > 0): no results, so never part of a line, a bar or an average; drawn as red
# crosses at the figure they gave, so that a reader sees where the check failed.
WRONG_COLOUR = "tab:red"
WRONG_LABEL = "wrong data (x): not a result"


def wrong_marks(ax, xs, ys):
    """Red crosses at (xs, ys); the legend names them once per plot."""
    if not xs:
        return
    named = getattr(ax, "_pickle_wrong_named", False)
    ax.plot(xs, ys, linestyle="none", marker="x", markersize=8, markeredgewidth=1.8, color=WRONG_COLOUR,
            label="_nolegend_" if named else WRONG_LABEL, zorder=5)
    ax._pickle_wrong_named = True


def wrong_suffix(count):
    """' (N wrong)' for a legend label of a series with N points of wrong data, else ''."""
    return " (%d wrong)" % count if count else ""


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
