#!/usr/bin/python3
"""Checks the layout of an `ftl report` page from its SVG alone:
- every tick label is a round value (1, 2 or 5 times a power of ten apart, or decades on a log
  axis) inside its axis range; no axis of these non-negative quantities goes below 0;
- the learning-rate axis is logarithmic when the plotted rates span more than 10x;
- every bar segment lies inside the plot area with a non-negative height; overlaid runs' bars
  share one y range;
- no two text boxes overlap (from position, anchor, font size and length: 0.6 em per character,
  the width the page is laid out with), rotated texts excepted;
- no empty cell in the facts tables.
usage: report_layout.py REPORT.html       Exits 1 with the problems."""
import math
import re
import sys
from html.parser import HTMLParser

FONT = {"t": 13, "yt": 10, "xt": 10, "xl": 11, "yl": 11, "lg": 11, "ml": 10, "bt": 9}
ANCHOR = {"yt": "end", "xt": "middle", "xl": "middle", "yl": "middle", "bt": "middle"}
EM = 0.6


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.charts, self.text, self.cells, self.in_facts, self.td = [], None, [], 0, None
        self.current = None  # the chart being read (None inside other SVGs: the heatmap)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.current = None
            if a.get("class") == "chart":
                self.current = {"scale": a.get("data-y-scale"), "title": "", "frame": None, "ticks": [], "texts": [],
                                "rects": [], "values": [], "in_title": True}
                self.charts.append(self.current)
        c = self.current
        if c is None:
            pass
        elif tag == "rect" and a.get("class") == "frame":
            c["frame"] = {k: float(a[k]) for k in ("x", "y", "width", "height", "data-y0", "data-y1", "data-x0", "data-x1")}
        elif tag == "rect" and "data-part" in a:
            c["rects"].append({k: float(a[k]) for k in ("x", "y", "width", "height")})
        elif tag == "circle" and "data-value" in a:
            c["values"].append(float(a["data-value"]))
        elif tag == "text":
            self.text = {"a": a, "s": ""}
        if tag == "table" and a.get("class") == "facts":
            self.in_facts += 1
        if tag == "td" and self.in_facts:
            self.td = ""

    def handle_endtag(self, tag):
        c = self.current
        if tag == "svg":
            self.current = None
        if tag == "title" and c and c["in_title"]:
            c["in_title"] = False
        if tag == "text" and self.text is not None and c is not None:
            a, s = self.text["a"], self.text["s"]
            if "data-tick" in a:
                c["ticks"].append((a["class"], float(a["data-tick"]), s))
            if "transform" not in a:
                cls = a.get("class", "")
                font = float(a.get("font-size", FONT.get(cls, 10)))
                anchor = a.get("text-anchor", ANCHOR.get(cls, "start"))
                x, y, w = float(a["x"]), float(a["y"]), len(s) * font * EM
                x0 = x - w if anchor == "end" else x - w / 2 if anchor == "middle" else x
                c["texts"].append((x0, y - 0.8 * font, x0 + w, y + 0.2 * font, s))
            self.text = None
        if tag == "table" and self.in_facts:
            self.in_facts -= 1
        if tag == "td" and self.td is not None:
            self.cells.append(self.td)
            self.td = None

    def handle_data(self, data):
        if self.text is not None:
            self.text["s"] += data
        if self.td is not None:
            self.td += data
        if self.current and self.current["in_title"]:
            self.current["title"] += data


def round_step(d):
    m = d / 10 ** math.floor(math.log10(d))
    return any(abs(m - k) < 1e-6 for k in (1, 2, 5, 10))


def main():
    p = Page()
    p.feed(open(sys.argv[1], encoding="utf-8").read())
    errors = []
    bar_tops = set()
    for c in p.charts:
        f, name = c["frame"], c["title"][:40]
        if not f:
            errors.append(f"{name}: no plot frame")
            continue
        y0, y1 = f["data-y0"], f["data-y1"]
        if y0 < 0:
            errors.append(f"{name}: the y axis goes below 0 ({y0})")
        ys = [v for k, v, _ in c["ticks"] if k == "yt"]
        xs = [v for k, v, _ in c["ticks"] if k == "xt"]
        for v in ys:
            if not (y0 - 1e-12 <= v <= y1 * (1 + 1e-12) + 1e-12):
                errors.append(f"{name}: y tick {v} outside [{y0}, {y1}]")
        for v in xs:
            if not (f["data-x0"] <= v <= f["data-x1"]) or v != round(v):
                errors.append(f"{name}: x tick {v} not a whole number inside [{f['data-x0']}, {f['data-x1']}]")
        if len(ys) < 2:
            errors.append(f"{name}: {len(ys)} y ticks")
        elif c["scale"] == "log":
            for a, b in zip(ys, ys[1:]):
                r = math.log10(b / a)
                if abs(r - round(r)) > 1e-9 or abs(math.log10(a) - round(math.log10(a))) > 1e-9:
                    errors.append(f"{name}: log ticks {a}, {b} are not decades")
        else:
            steps = [b - a for a, b in zip(ys, ys[1:])]
            if max(steps) - min(steps) > 1e-9 * max(steps) or not round_step(steps[0]):
                errors.append(f"{name}: y ticks {ys} not in one 1-2-5 step")
            for v in ys:
                if abs(v / steps[0] - round(v / steps[0])) > 1e-6:
                    errors.append(f"{name}: y tick {v} is not a multiple of its step {steps[0]}")
        for k, v, s in c["ticks"]:  # the label says the value
            if abs(float(s) - v) > 1e-9 * max(1, abs(v)):
                errors.append(f"{name}: tick label '{s}' for {v}")
        if c["title"].startswith("Learning rate") and c["values"]:
            pos = [v for v in c["values"] if v > 0]
            wide = pos and max(pos) / min(pos) > 10
            if wide != (c["scale"] == "log"):
                errors.append(f"{name}: rates {min(pos)}..{max(pos)} on a {c['scale']} axis")
        if c["rects"]:
            bar_tops.add(y1)
        for r in c["rects"]:
            if r["height"] < 0 or r["y"] < f["y"] - 0.01 or r["y"] + r["height"] > f["y"] + f["height"] + 0.01:
                errors.append(f"{name}: bar segment {r} outside the plot {f['y']}..{f['y'] + f['height']}")
        t = c["texts"]
        for i in range(len(t)):
            for j in range(i + 1, len(t)):
                a, b = t[i], t[j]
                if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]:
                    errors.append(f"{name}: '{a[4]}' and '{b[4]}' overlap")
    if len(bar_tops) > 1:
        errors.append(f"time bars of the runs on different scales: {sorted(bar_tops)}")
    empty = [i for i, s in enumerate(p.cells) if not s.strip()]
    if empty:
        errors.append(f"{len(empty)} empty cells in the facts tables")
    if not p.charts:
        errors.append("no charts")
    for e in errors[:40]:
        print(e)
    sys.exit(1 if errors else 0)


main()
