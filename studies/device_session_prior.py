"""What the device-time session prior's weight does to false alarms and power, side by side (issue 19).

Simulates a first look of a side-by-side device-time measurement: 2 fresh session pairs x 3 cycles,
per-cycle ln ratio = effect + pair offset (normal, sd ``tau``: sessions that picked other kernels) +
cycle noise (sd 0.05%, kernel time per run within one session on the H100), judged as
:func:`pytest_aaco.sidebyside.cycles.device_look_of` does (:func:`pytest_aaco.api.paired_t`
with the 0.3% prior, the 1% threshold, level 0.011), with the prior as a floor only (``session_df``
0, before) and weighted as 4 pairs (now). A confirmed false alarm needs two looks, so its rate is
about the square of the per-look one. Prints, per tau and effect, the share of looks that found a
regression and that stopped as decided.
"""

from __future__ import annotations

import argparse

import numpy as np

from pytest_aaco.api import DEVICE_TIME_SESSION_SD, outcome_of, paired_t

LEVEL, UPPER_ALPHA, THRESHOLD, CYCLE_SD = 0.011, 0.0115, 0.01, 0.0005


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20000)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: checks that the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.trials = 50
    rng = np.random.default_rng(0)
    print("tau    effect  session_df  regression  decided")
    for tau in (0.001, 0.005, 0.01, 0.02):
        for effect in (0.0, 0.02, 0.07):
            for df in (0.0, 4.0):
                found = decided = 0
                for _ in range(args.trials):
                    pairs = [effect + rng.normal(0, tau) + rng.normal(0, CYCLE_SD, 3) for _ in range(2)]
                    comp = paired_t(pairs, DEVICE_TIME_SESSION_SD, df)
                    outcome = str(outcome_of(comp, THRESHOLD, LEVEL, upper_alpha=UPPER_ALPHA))
                    found += outcome == "regression"
                    decided += outcome != "inconclusive"
                print(f"{tau:.3f}  {effect:+.2f}    {df:>4.0f}        {found / args.trials:8.4f}"
                      f"    {decided / args.trials:.3f}")


if __name__ == "__main__":
    main()
