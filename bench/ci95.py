"""ci95.py - mean and 95% confidence interval (Student's t) over benchmark rounds, for
the sweep scripts (engine-sweep.sh, costs.sh), which put bench/ on PYTHONPATH."""
import math

# Two-sided 95% quantiles of Student's t by degrees of freedom; past 30, 30's.
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
       9: 2.262, 10: 2.228, 15: 2.131, 20: 2.086, 30: 2.042}


def t95(df):
    return T95[max(k for k in T95 if k <= df)]


def mean_ci(values):
    """(n, mean, half-width of the 95% CI) of the values that are not None; the
    interval is NaN with fewer than two values, the mean too with none."""
    v = [x for x in values if x is not None]
    n = len(v)
    if n == 0:
        return 0, float("nan"), float("nan")
    m = sum(v) / n
    if n < 2:
        return n, m, float("nan")
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (n - 1))
    return n, m, t95(n - 1) * sd / math.sqrt(n)
