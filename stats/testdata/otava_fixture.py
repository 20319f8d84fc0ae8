# Writes otava_changepoints.json: series and the change points Apache Otava 0.8.0 finds in them.
# Command (from the repository root):
#   python3 -m venv /tmp/otava && /tmp/otava/bin/pip install apache-otava==0.8.0
#   /tmp/otava/bin/python stats/testdata/otava_fixture.py > stats/testdata/otava_changepoints.json
import json, random
from importlib.metadata import version
from otava.analysis import compute_change_points_orig, compute_change_points

rng = random.Random(38)
def noisy(level, n, sd):
    return [round(rng.gauss(level, sd), 3) for _ in range(n)]

series = {
    # one step: six versions at ~100 ms, four slower at ~140 ms
    "one_step": noisy(100, 6, 3) + noisy(140, 4, 3),
    # two steps in 60 points: up at 20, back down at 45
    "two_steps": noisy(50, 20, 2) + noisy(65, 25, 2) + noisy(52, 15, 2),
    # noise only
    "noise": noisy(10, 30, 1),
    # a small step in heavy noise, 40 points
    "small_step": noisy(20, 20, 4) + noisy(24, 20, 4),
}
out = {"otava": version("apache-otava"),
       "command": "/tmp/otava/bin/python stats/testdata/otava_fixture.py > stats/testdata/otava_changepoints.json",
       "max_pvalue": 0.05, "series": {}}
for name, s in series.items():
    orig, _ = compute_change_points_orig(s, max_pvalue=0.05, seed=1)
    hunter, _ = compute_change_points(s, window_len=50, max_pvalue=0.05)
    out["series"][name] = {
        "values": s,
        "edivisive_permutation": [{"index": int(c.index), "qhat": float(c.qhat), "p": float(c.stats.pvalue)} for c in orig],
        "hunter_ttest": [{"index": int(c.index), "p": float(c.stats.pvalue)} for c in hunter],
    }
print(json.dumps(out, indent=1))
