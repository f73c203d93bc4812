"""Time the regularized 2PL fit and its model bootstrap at the paper's scale.

    python benchmarks/irt.py [--items 10000] [--models 11] [--replicates 1000]

Simulates a models x items 0/1 matrix (slopes lognormal around 1 with a tenth of the items
reversed, difficulties and abilities standard normal, fixed seed), then prints the seconds of
one full fit, of the bootstrap, and the peak resident memory. The fit solves each distinct
response column once; a simulated panel of 11 models gives up to 2^11 of them, where the
packages' panels of nested evidence readers give a few dozen. Targets on a 2-core machine: the
fit within 10 s, the 1,000-replicate bootstrap within 3 minutes.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from forge_skills.evaluate import BOOTSTRAP_SEED, fit_2pl, model_bootstrap
from forge_skills.evaluate.irt import distinct_columns


def simulate(n_models: int, n_items: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.lognormal(0.0, 0.5, n_items) * np.where(rng.random(n_items) < 0.1, -1.0, 1.0)
    b = rng.normal(0.0, 1.0, n_items)
    theta = rng.normal(0.0, 1.0, n_models)
    p = 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))
    return (rng.random(p.shape) < p).astype(float)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--models", type=int, default=11)
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    y = simulate(args.models, args.items, args.seed)

    t0 = time.perf_counter()
    fit = fit_2pl(y)
    t_fit = time.perf_counter() - t0
    print(f"fit: {args.items} items x {args.models} models ({distinct_columns(y).items.size} distinct response "
          f"columns) in {t_fit:.2f} s (target <= 10 s); converged={fit.converged}, "
          f"high-disc share {fit.high_disc_share:.3f}")
    for i, r in enumerate(fit.rounds, 1):
        print(f"  round {i}: L-BFGS-B {r.item_iterations} iterations, ability <= {r.theta_evaluations} "
              f"evaluations, max ability change {r.theta_change:.2e}")

    t0 = time.perf_counter()
    boot = model_bootstrap(y, replicates=args.replicates, seed=BOOTSTRAP_SEED, reference=fit)
    t_boot = time.perf_counter() - t0
    lo, hi = boot.high_disc_interval
    print(f"bootstrap: {args.replicates} replicates in {t_boot:.1f} s (target <= 180 s); "
          f"high-disc share 95% interval [{lo:.3f}, {hi:.3f}], "
          f"median band stability {np.median(boot.band_stability):.2f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory: {peak:.0f} MB")


if __name__ == "__main__":
    main()
