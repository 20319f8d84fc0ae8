# Writes otava_versions.json: the warm snapshot takes of docs/results.md's ten sweeps (one per
# engine version label, v7-v10 built with a 60 ms delay per snapshot block), as
# `rig history trend snapshot.take --order version --json` gave them, and the change points Apache
# Otava 0.8.0 finds in the series of version medians and in the series of run medians.
# Command (from the repository root, with the trend's JSON in /tmp/hist-demo/versions/trend.json):
#   /tmp/otava/bin/python history/testdata/otava_versions.py /tmp/hist-demo/versions/trend.json > history/testdata/otava_versions.json
import json, statistics, sys
from importlib.metadata import version
from otava.analysis import compute_change_points_orig, compute_change_points
from otava.change_point_divisive.calculator import PairDistanceCalculator
from otava.change_point_divisive.detector import ChangePointDetector
from otava.change_point_divisive.significance_test import PermutationsSignificanceTester

trend = json.load(open(sys.argv[1]))
versions = [{"label": v["label"], "sha256": v["sha256"], "runs": v["runs"], "values": v["values"]} for v in trend["versions"]]
per_version = [statistics.median(v["values"]) for v in versions]
# Each run gave 3 warm takes, in run order.
per_run = [statistics.median(v["values"][i:i + 3]) for v in versions for i in range(0, len(v["values"]), 3)]

def otava(series):
    orig, _ = compute_change_points_orig(series, max_pvalue=0.05, seed=1)
    hunter, _ = compute_change_points(series, window_len=50, max_pvalue=0.05)
    # compute_change_points_orig shuffles 100 times: a p near 0.05 falls either side by seed.
    tester = PermutationsSignificanceTester(max_pvalue=0.05, permutations=2000, calculator=PairDistanceCalculator, seed=1)
    many = ChangePointDetector(significance_tester=tester, calculator=PairDistanceCalculator).get_change_points(series=series)
    return {"series": series,
            "edivisive_permutation": [{"index": int(c.index), "qhat": float(c.qhat), "p": float(c.stats.pvalue)} for c in orig],
            "edivisive_permutation_2000": [{"index": int(c.index), "qhat": float(c.qhat), "p": float(c.stats.pvalue)} for c in many],
            "hunter_ttest": [{"index": int(c.index), "p": float(c.stats.pvalue)} for c in hunter]}

print(json.dumps({"otava": version("apache-otava"), "figure": trend["figure"],
                  "command": "/tmp/otava/bin/python history/testdata/otava_versions.py /tmp/hist-demo/versions/trend.json > history/testdata/otava_versions.json",
                  "versions": versions, "per_version": otava(per_version), "per_run": otava(per_run)}, indent=1))
