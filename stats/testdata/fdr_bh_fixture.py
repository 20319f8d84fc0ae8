# Writes fdr_bh.json: p-value families and statsmodels' Benjamini–Hochberg adjustment of each.
# Command (from the repository root):
#   python3 -m venv /tmp/otava && /tmp/otava/bin/pip install statsmodels
#   /tmp/otava/bin/python stats/testdata/fdr_bh_fixture.py > stats/testdata/fdr_bh.json
import json, random
from importlib.metadata import version
from statsmodels.stats.multitest import multipletests

rng = random.Random(38)
families = {
    # 15 verdicts in the shape of a 2x2 sweep report's: several from 2 values a side (p = 1/3)
    "sweep_2x2": [0.333, 0.333, 0.0286, 0.333, 0.667, 1.0, 0.0286, 0.114, 0.333, 0.0079, 0.686, 0.2, 0.04, 0.333, 0.0011],
    "ties_and_ones": [0.01, 0.01, 0.04, 0.04, 1.0, 1.0, 0.0],
    "uniform_50": [round(rng.random(), 6) for _ in range(50)],
    "mixed_20": [round(rng.random() * 0.01, 6) for _ in range(5)] + [round(rng.random(), 6) for _ in range(15)],
    "single": [0.03],
}
out = {"statsmodels": version("statsmodels"), "alpha": 0.05,
       "command": "/tmp/otava/bin/python stats/testdata/fdr_bh_fixture.py > stats/testdata/fdr_bh.json", "families": {}}
for name, p in families.items():
    reject, q, _, _ = multipletests(p, alpha=0.05, method="fdr_bh")
    out["families"][name] = {"p": p, "q": [float(v) for v in q], "reject": [bool(r) for r in reject]}
print(json.dumps(out, indent=1))
