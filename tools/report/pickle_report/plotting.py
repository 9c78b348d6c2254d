"""matplotlib with the Agg backend (no display needed) and the figure conventions every suite shares:
log2 size axis labelled 4K, 1M, 1G; a two-line title (machine, suite, mode / source file); small PNGs."""
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


def title(ax, headline, source):
    ax.set_title("%s\n%s" % (headline, source), fontsize=10)


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
