#!/usr/bin/python3
"""Reads an `ftl report` page back and checks it against its inputs: every plotted point of every
log (epoch and exact value, per metric), the time bars, the eval section (per-class accuracy worst
first, the confusion heatmap) and the timeline's ranks; no script, nothing loaded from outside.
usage: report_readback.py REPORT.html LOG.jsonl... [--eval EVAL.json] [--timeline TRACE.json]
                          [--expect-resumes N]
Exits 1 with the differences."""
import json
import sys
from html.parser import HTMLParser


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.svgs, self.series, self.rows, self.rects, self.csp, self.external = [], [], [], [], False, []
        self.th, self.in_th, self.script = [], False, False
        self.last_point, self.in_point_title, self.tooltips = None, False, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ("src", "href"):
            if k in a:
                self.external.append(a[k])
        if tag == "script":
            self.script = True
        if tag == "meta" and a.get("http-equiv") == "Content-Security-Policy" and "default-src 'none'" in a.get("content", ""):
            self.csp = True
        if tag == "svg":
            self.svgs.append({"class": a.get("class"), "series": [], "bars": [], "rects": []})
        elif tag == "g" and a.get("class") == "series":
            s = {"run": int(a["data-run"]), "metric": a["data-metric"], "points": []}
            self.svgs[-1]["series"].append(s)
        elif tag == "title" and self.svgs and self.last_point is not None:
            self.in_point_title = True
        elif tag == "circle" and "data-value" in a:
            self.svgs[-1]["series"][-1]["points"].append((float(a["data-x"]), float(a["data-value"])))
            self.svgs[-1]["series"][-1].setdefault("where", []).append((a.get("data-phase"), a.get("data-epoch")))
            self.last_point = float(a["data-value"])
        elif tag == "g" and a.get("class") == "bar":
            self.svgs[-1]["bars"].append({"epoch": float(a["data-x"]), "phase": a["data-phase"],
                                          "in_phase": a["data-epoch"], "parts": {}})
        elif tag == "rect" and "data-part" in a:
            self.svgs[-1]["bars"][-1]["parts"][a["data-part"]] = float(a["data-value"])
            self.last_point = float(a["data-value"])
        elif tag == "rect" and "data-count" in a:
            self.svgs[-1]["rects"].append((int(a["data-true"]), int(a["data-predicted"]), float(a["data-count"])))
        elif tag == "tr" and ("data-accuracy" in a or "data-rank" in a):
            self.rows.append(a)
        elif tag == "th":
            self.in_th = True

    def handle_endtag(self, tag):
        if tag == "th":
            self.in_th = False
        if tag == "title":
            self.in_point_title = False
        if tag in ("circle", "rect"):
            self.last_point = None

    def handle_data(self, data):
        if self.in_point_title:
            self.tooltips.append((self.last_point, data))
        if self.in_th:
            self.th.append(data)


def main():
    args = sys.argv[1:]
    opts = {}
    for k in ("--eval", "--timeline", "--expect-resumes"):
        if k in args:
            i = args.index(k)
            opts[k] = args[i + 1]
            del args[i:i + 2]
    page_path, logs = args[0], args[1:]
    p = Page()
    p.feed(open(page_path, encoding="utf-8").read())
    errors = []
    if not p.csp:
        errors.append("no Content-Security-Policy allowing nothing from outside")
    if p.script or p.external:
        errors.append(f"scripts or external references: {p.external[:3]}")
    names = {"data wait": "data_wait_s", "backbone": "backbone_s", "head": "head_s", "allreduce": "allreduce_s",
             "validation": "validation_s", "checkpoint": "checkpoint_s", "other": "other_s"}
    line_charts = [s for s in p.svgs if s["series"] and s["series"][0]["metric"] != "step_ms"]
    bar_charts = [s for s in p.svgs if s["bars"]]
    for run, path in enumerate(logs):
        # the epochs as the page should place them: phase 2 (a run record with "phase":"fine-tune")
        # after phase 1's last epoch; epochs a resumed run logs again replace the earlier records
        # (and the phase-2 epochs after them); a run appended without a resume keeps all its own
        recs, phase, segment, resumed = [], 1, 0, False
        for line in open(path):
            try:
                r = json.loads(line)
            except ValueError:
                continue  # the truncated last line the report skips too
            if r.get("record") == "run":
                phase = 2 if r.get("phase") == "fine-tune" else 1
                segment, resumed = segment + 1, r.get("resume") is not None
            elif r.get("record", "epoch") == "epoch" and "epoch" in r:
                r["phase"], r["segment"] = phase, segment
                while resumed and recs and recs[-1]["segment"] != segment and (
                        recs[-1]["phase"] > phase or (recs[-1]["phase"] == phase and recs[-1]["epoch"] >= r["epoch"])):
                    recs.pop()
                recs.append(r)
        end1 = max([r["epoch"] for r in recs if r["phase"] == 1] or [0])
        for r in recs:
            r["x"] = float(r["epoch"] + (end1 if r["phase"] == 2 else 0))
        for metric in ("loss", "val_loss", "acc", "val_acc", "lr"):
            want = [(r["x"], float(r[metric])) for r in recs if r.get(metric) is not None]
            got = [pt for chart in line_charts for s in chart["series"] if s["run"] == run and s["metric"] == metric
                   for pt in s["points"]]
            if got != want:
                errors.append(f"{path} {metric}: page has {len(got)} points {got[:3]}, log has {len(want)} {want[:3]}")
            where = [w for chart in line_charts for s in chart["series"] if s["run"] == run and s["metric"] == metric
                     for w in s.get("where", [])]
            want_where = [(str(r["phase"]), str(r["epoch"])) for r in recs if r.get(metric) is not None]
            if where != want_where:
                errors.append(f"{path} {metric}: points' phase and epoch {where[:4]} vs {want_where[:4]}")
        bars = bar_charts[run]["bars"] if run < len(bar_charts) else []
        if [b["epoch"] for b in bars] != [r["x"] for r in recs]:
            errors.append(f"{path}: time bars for epochs {[b['epoch'] for b in bars]}")
        for b, r in zip(bars, recs):
            if (b["phase"], b["in_phase"]) != (str(r["phase"]), str(r["epoch"])):
                errors.append(f"{path}: bar at x {b['epoch']} says phase {b['phase']} epoch {b['in_phase']}")
            for part, key in names.items():
                want = r["time"].get(key)
                want = max(0.0, float(want)) if want is not None else 0.0  # drawn from 0, never below
                if b["parts"].get(part) != want:
                    errors.append(f"{path} epoch {r['epoch']} {part}: {b['parts'].get(part)} vs {want}")
    # every point's and bar segment's tooltip ends with its exact value
    bad = [(v, t) for v, t in p.tooltips if float(t.rstrip(" s").rsplit(": ", 1)[1]) != v]
    if bad or not p.tooltips:
        errors.append(f"{len(bad)} tooltips without their exact value, e.g. {bad[:2]} ({len(p.tooltips)} tooltips)")
    if "--eval" in opts:
        ev = json.load(open(opts["--eval"]))
        rows = [r for r in p.rows if "data-accuracy" in r]
        accs = [float(r["data-accuracy"]) for r in rows]
        if accs != sorted(accs) or sorted(r["data-class"] for r in rows) != sorted(c["name"] for c in ev["classes"]):
            errors.append(f"per-class rows {rows}")
        cells = [r for s in p.svgs for r in s["rects"]]
        want = [(i, j, float(c)) for i, row in enumerate(ev["confusion"]) for j, c in enumerate(row)]
        if cells != want:
            errors.append(f"heatmap {cells[:4]} vs {want[:4]}")
    if "--timeline" in opts:
        tr = json.load(open(opts["--timeline"]))
        ranks = {e["pid"] for e in tr if e.get("ph") == "X"}
        got = sorted(int(r["data-rank"]) for r in p.rows if "data-rank" in r)
        if got != sorted(ranks):
            errors.append(f"timeline ranks {got} vs {sorted(ranks)}")
    if "--expect-resumes" in opts:
        n = sum(1 for t in p.th if t == "resumed")
        if n != int(opts["--expect-resumes"]):
            errors.append(f"{n} resumed rows, expected {opts['--expect-resumes']}")
    for e in errors:
        print(e)
    sys.exit(1 if errors else 0)


main()
