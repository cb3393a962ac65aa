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
