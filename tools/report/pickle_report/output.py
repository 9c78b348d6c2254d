"""The output folder: where plots go and how report.md links to them."""
import os
import re


class Output:
    def __init__(self, directory):
        self.directory = directory
        self.plots = []

    def plot_path(self, stem, *parts):
        """(absolute path to write, link relative to report.md) for a PNG named stem-part1-part2.png."""
        name = "-".join([stem] + [re.sub(r"[^A-Za-z0-9._-]+", "_", str(p)) for p in parts]) + ".png"
        self.plots.append(name)
        return os.path.join(self.directory, name), name
