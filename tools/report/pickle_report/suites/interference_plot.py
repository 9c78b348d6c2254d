"""What the interference plots share, whatever their x axis (message size, or lanes): per backend, relative
throughput as a line, the background bandwidth in the timed window dashed (hollow markers) on a second axis, and a red
cross where the background did not overlap the window."""
from .. import plotting


def draw_series(ax, bw_axis, backends, rows_of, x_of, display, markersize):
    """Draws each backend's measured rows (rows_of(backend), sorted along x) at x_of(row); returns every relative
    throughput drawn, for the y range."""
    relatives = []
    for i, backend in enumerate(backends):
        colour, marker = plotting.style(backend, i)
        good = rows_of(backend)
        if not good:
            ax.plot([], [], linestyle=":", color=colour, label="%s: no data" % display(backend))
            continue
        xs = [x_of(r) for r in good]
        ys = [r.relative for r in good]
        relatives += ys
        ax.plot(xs, ys, marker=marker, markersize=markersize, color=colour,
                label="%s relative throughput" % display(backend))
        # Hollow markers too: a run of one size (seed 001's 1 GB allgather) is a single point, which a dashed line
        # alone does not draw.
        bw_axis.plot(xs, [r.gbps or 0.0 for r in good], linestyle="--", color=colour, alpha=0.6, linewidth=1,
                     marker=marker, markersize=max(3, markersize - 1), markerfacecolor="none",
                     label="%s background GB/s" % display(backend))
        bad = [r for r in good if not r.overlap]
        if bad:
            ax.plot([x_of(r) for r in bad], [r.relative for r in bad], linestyle="none", marker="x", color="red",
                    markersize=9, label="%s: no overlap" % display(backend))
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
    return relatives


def finish_axes(ax, bw_axis, relatives):
    """The y ranges and labels, and one legend for both axes."""
    low = min(relatives) if relatives else 1.0
    high = max(relatives) if relatives else 1.0
    ax.set_ylim(min(0.8, low - 0.03), max(1.05, high + 0.02))
    ax.set_ylabel("relative throughput (t_alone / t_with)")
    bw_axis.set_ylabel("background bandwidth in the window (GB/s, dashed)")
    bw_axis.set_ylim(bottom=0)
    lines, labels = ax.get_legend_handles_labels()
    more_lines, more_labels = bw_axis.get_legend_handles_labels()
    ax.legend(lines + more_lines, labels + more_labels, fontsize=7, loc="lower left")
