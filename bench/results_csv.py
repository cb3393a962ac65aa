"""results_csv.py - the sweep scripts' results files: a CSV whose first line is the
provenance (commit and machine, bench/provenance.py) as a comment, read back so that a
section not rerun keeps its last results, and mean ± CI cells for the reports. The
Python drivers put bench/ on sys.path for it."""
import csv

from ci95 import mean_ci


def write_csv(path, head, fields, rows):
    """@rows (dicts) under @fields, after '# @head'; keys not in @fields are left out."""
    with open(path, "w", newline="") as f:
        f.write("# %s\n" % head)
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)


def read_csv(path, text=()):
    """(provenance line, rows) of an earlier run's CSV, ("", []) if there is none; every
    column but those in @text as a number (None when empty)."""
    try:
        f = open(path)
    except FileNotFoundError:
        return "", []
    with f:
        head = f.readline()[2:].strip()
        rows = list(csv.DictReader(f))
    for r in rows:
        for k, v in r.items():
            if k in text:
                continue
            try:
                r[k] = float(v) if v != "" else None
            except ValueError:
                pass
    return head, rows


def fmt(values, f="%.3g"):
    """'mean ± CI' of @values with format @f; '-' for none, the mean alone for one."""
    n, m, ci = mean_ci(values)
    if n == 0:
        return "-"
    return (f % m) + ("" if ci != ci else " ± " + f % ci)


def plot_bars(png, title, bars, left, right):
    """Two bar charts side by side with 95% CI whiskers: @bars is a list of (label,
    left values, right values), @left and @right the panels' titles."""
    import os
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False) as f:
        for i, (label, lv, rv) in enumerate(bars):
            _, lm, lci = mean_ci(lv)
            _, rm, rci = mean_ci(rv)
            f.write("%d %s %g %g %g %g\n" % (i, label, lm, 0 if lci != lci else lci,
                                             rm, 0 if rci != rci else rci))
        dat = f.name
    script = """
set terminal pngcairo size 1000,420 font ",10" noenhanced
set output "%s"
set multiplot layout 1,2 title "%s (mean, 95%% CI)"
set style fill solid 0.5
set boxwidth 0.6
set xtics rotate by -30
set yrange [0:*]
set title "%s"
plot "%s" using 1:3:xtic(2) with boxes notitle, "" using 1:3:4 with yerrorbars notitle
set title "%s"
plot "%s" using 1:5:xtic(2) with boxes notitle, "" using 1:5:6 with yerrorbars notitle
""" % (png, title.replace('"', "'")[:110], left, dat, right, dat)
    subprocess.run(["gnuplot"], input=script, text=True, check=False)
    os.unlink(dat)
