"""`pickle bench matrix`: the all-pairs P2P bandwidth matrix (nvbandwidth-style), one `pickle bench p2p` child per
ordered pair of devices.

Per mode and backend: the matrix as a table (row = sender, column = receiver, GB/s) and a heatmap with the numbers
on it; per mode, the pickle/NCCL and pickle/ce ratio matrices where both exist."""
import os

from .. import machine, markdown, plotting
from ..inputs import require
from ..units import number, ratio, size_words
from .registry import Suite, register

MODE_WORDS = {"uni": "unidirectional GB/s", "bi": "bidirectional GB/s (both directions at once, summed)"}


def _grid(bench, matrix, key, where, devices):
    rows = require(bench, matrix, key, list, where)
    if len(rows) != devices or any(not isinstance(r, list) or len(r) != devices for r in rows):
        raise bench.fail("%s.%s is not %d x %d" % (where, key, devices, devices))
    for row in rows:
        for value in row:
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
                raise bench.fail("%s.%s holds %r; cells are null or numbers not below 0" % (where, key, value))
    return rows


def check(bench):
    devices = require(bench, bench.data, "devices", int, "the file")
    for i, matrix in enumerate(require(bench, bench.data, "matrices", list, "the file")):
        where = "matrices[%d]" % i
        for key in ("mode", "backend", "status"):
            require(bench, matrix, key, str, where)
        _grid(bench, matrix, "gbps", where, devices)
        _grid(bench, matrix, "wrong", where, devices)
    for i, pair in enumerate(bench.data.get("pairs") or []):
        for key in ("sender", "receiver"):
            require(bench, pair, key, int, "pairs[%d]" % i)
        require(bench, pair, "status", str, "pairs[%d]" % i)


def _cell(matrix, i, j):
    if i == j:
        return "—"
    value = matrix["gbps"][i][j]
    if value is not None:
        return number(value)
    return "FAILED" if matrix["status"] == "failed" else "n/a"


def _table(cells, devices):
    header = ["Sender \\ Receiver"] + [str(j) for j in range(devices)]
    return markdown.table(header, [[str(i)] + [cells(i, j) for j in range(devices)] for i in range(devices)])


def _ratios(top, bottom, devices):
    out = [[None] * devices for _ in range(devices)]
    for i in range(devices):
        for j in range(devices):
            a, b = top["gbps"][i][j], bottom["gbps"][i][j]
            if i != j and a is not None and b:
                out[i][j] = a / b
    return out


def _heatmap(bench, matrix, out):
    """The matrix as an image: colour = GB/s, the number written in each cell, the diagonal blank."""
    devices = bench.data["devices"]
    values = [[float("nan") if v is None else v for v in row] for row in matrix["gbps"]]
    fig, ax = plotting.figure()
    ax.grid(False)
    image = ax.imshow(values, cmap="viridis", vmin=0)
    fig.colorbar(image, ax=ax, label=MODE_WORDS.get(matrix["mode"], "GB/s"))
    top = max([v for row in matrix["gbps"] for v in row if v is not None] or [0])
    for i in range(devices):
        for j in range(devices):
            text = "—" if i == j else (number(matrix["gbps"][i][j]) if matrix["gbps"][i][j] is not None
                                       else ("FAILED" if matrix["status"] == "failed" else "n/a"))
            value = matrix["gbps"][i][j]
            # Dark text on the bright end of viridis, light text elsewhere.
            colour = "black" if value is not None and top > 0 and value > 0.6 * top else "white"
            ax.text(j, i, text, ha="center", va="center", fontsize=8 if devices <= 8 else 6,
                    color=colour if value is not None else "black")
    ax.set_xticks(range(devices))
    ax.set_yticks(range(devices))
    ax.set_xlabel("receiver")
    ax.set_ylabel("sender")
    plotting.title(ax, "%s: %s %s at %s" % (machine.short(bench.data), matrix["backend"], matrix["mode"],
                                            size_words(bench.data.get("size") or 0)),
                   "%s (%s)" % (os.path.basename(bench.path), machine.date(bench.data)))
    path, link = out.plot_path(bench.stem, matrix["mode"], matrix["backend"])
    plotting.save(fig, path)
    return link


def _method(bench):
    o = bench.data.get("options") or {}
    return ("%s devices, %s memory, %s per message; one `pickle bench p2p --ranks 2` child per ordered pair, one at "
            "a time, with CUDA_VISIBLE_DEVICES=sender,receiver; a cell is the child's median over its repeats; "
            "GB/s = 1e9 bytes/s" % (bench.data["devices"], o.get("memory") or "?",
                                    size_words(bench.data.get("size") or 0)))


def render(bench, out):
    lines = ["**Method**: %s (docs/bench.md)." % _method(bench)]
    lines += markdown.notes(bench.data)
    if bench.data.get("waived"):
        return lines + ["", "**Waived**: %s; nothing was measured." % bench.data["waived"]]
    devices = bench.data["devices"]
    matrices = bench.data["matrices"]
    for matrix in matrices:
        mode, backend = matrix["mode"], matrix["backend"]
        lines += ["", "### %s, %s: %s" % (mode, backend, MODE_WORDS.get(mode, "GB/s")), ""]
        if matrix["status"] == "unavailable":
            lines.append("Unavailable: %s." % (matrix.get("detail") or "?"))
            continue
        lines += _table(lambda i, j, m=matrix: _cell(m, i, j), devices)
        wrong = sum(w for row in matrix["wrong"] for w in row if w)
        lines += ["", "#wrong: %d%s" % (wrong, "" if matrix["status"] != "failed"
                                       else "; FAILED: %s" % (matrix.get("detail") or "?"))]
        lines += ["", markdown.image("%s %s matrix" % (mode, backend), _heatmap(bench, matrix, out))]
    by_key = {(m["mode"], m["backend"]): m for m in matrices if m["status"] != "unavailable"}
    for top in matrices:
        mode = top["mode"]
        if top["backend"] != "pickle" or (mode, "pickle") not in by_key:
            continue
        for other in ("nccl", "ce"):
            bottom = by_key.get((mode, other))
            if bottom is None:
                continue
            values = _ratios(top, bottom, devices)
            lines += ["", "### %s, pickle/%s: ratio per cell" % (mode, other), ""]
            lines += _table(lambda i, j, v=values: "—" if i == j else ratio(v[i][j]), devices)
    return lines


register(Suite("matrix", check, render))
