"""Pooled run-to-run variance and physical-GPU offsets for stored baselines.

The run-to-run variance of an item's run means (ln units) belongs mostly to the machine: the GPU
model, its driver and clocks for device time, the runner for wall time. A history of 2 or 3 runs
cannot estimate it (1 or 2 degrees of freedom), so the gate borrows it from every item of the same
baseline folder (one runner, one GPU model: :meth:`pytest_aaco.history.fingerprint.Fingerprint.machine_key`):

* **variance model** (empirical Bayes, Smyth 2004): each item's sample variance ``s_g²`` of its
  run means, with ``d_g = runs - 1`` df, is drawn from ``σ_g² χ²_{d_g} / d_g`` and ``1/σ_g²`` from a
  scaled inverse-chi-square prior ``(d0, s0²)``, fitted to all items' ``s_g²`` by the moment
  estimator of :func:`pytest_aaco.verdict.stats.fit_variance_prior`. The posterior variance is
  ``s̃² = (d0 s0² + d s²) / (d0 + d)`` and the test statistic ``(x - m) / (s̃ sqrt(1 + 1/H))``
  follows Student t with ``d0 + d`` df under no change: the moderated t of limma (Smyth 2004,
  eq. 5 and section 3). ``d0`` is capped at the df the pool was fitted on
  (:data:`D0_CAP_SHARE`), so a prior fitted on a few short histories cannot claim more information
  than they hold.
* **physical GPUs as a random effect**: a run mean is ``y = μ_item + γ_gpu + ε``. The offsets
  ``γ`` are fitted by alternating means over the items whose runs landed on several GPUs, then
  shrunk toward 0 as best linear unbiased predictors of a one-way random effect (variance
  ``τ²`` by the method of moments; Searle, Casella & McCulloch, *Variance Components*, 1992,
  ch. 3). The gate subtracts each run's GPU offset before testing, and adds the current GPU's
  offset's posterior variance to the test's variance, so items that land on another GPU of the
  same model are neither biased by its offset nor widened by it.

Source: G. K. Smyth, "Linear models and empirical Bayes methods for assessing differential
expression in microarray experiments", Statistical Applications in Genetics and Molecular Biology
3(1), article 3, 2004 (https://doi.org/10.2202/1544-6115.1027).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from pytest_aaco.jsonio import JSONDict
from pytest_aaco.verdict import stats

#: pooled series: device time (ln kernel time per run) or wall time (round log-means)
DEVICE, WALL = "device", "wall"
#: the series kinds pooling applies to (the reference-adjusted test keeps its own residual prior)
RAW, NORMALIZED = "raw", "normalized"
#: d0 is capped at this share of the df the prior was fitted on (their sum over items): with 6 items of
#: 2 runs the false-alarm rate at level 0.05 was 0.069 uncapped and 0.062 at 0.5 (studies/pooled_sim.py)
D0_CAP_SHARE = 0.5
#: fewest items with at least 2 runs before a prior is fitted (Smyth's estimator needs a spread)
MIN_ITEMS = 3
#: the method name of the pooled test, as verdicts record it
METHOD = "pooled-prediction-interval"


def run_gpu(run: Mapping[str, object]) -> str | None:
    """The physical GPU a history run recorded (``gpu.uuid``, else ``gpu.pci_bus_id``), or None."""
    gpu = run.get("gpu")
    if not isinstance(gpu, dict):
        return None
    key = gpu.get("uuid") or gpu.get("pci_bus_id")
    return str(key) if key else None


def _mean(values: object) -> float | None:
    """The mean of a non-empty list of finite numbers, else None (a stored record that lacks them)."""
    if not isinstance(values, (list, tuple)) or not values:
        return None
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return None
    return float(arr.mean()) if arr.ndim == 1 and np.all(np.isfinite(arr)) else None


def _reference_device(run: Mapping[str, object], ref_id: str | None) -> list[float] | None:
    ref = run.get("reference")
    if not isinstance(ref, dict) or (ref_id is not None and ref.get("id") != ref_id):
        return None
    dev = ref.get("device_time")
    logs = dev.get("log_means") if isinstance(dev, dict) else None
    return list(logs) if logs else None


def run_means(history: Iterable[Mapping[str, object]], metric: str, kind: str, ref_id: str | None = None
              ) -> list[tuple[str | None, float]]:
    """Per usable history run, ``(gpu, mean)``: the run's GPU (:func:`run_gpu`) and the mean of the
    series the gate tests (ln units), oldest first.

    *metric* :data:`DEVICE`: the item's ``device_time.log_means`` (``raw``) or per block ``ln(item) -
    ln(reference)`` against the reference workload's device time of id *ref_id* (``normalized``; any
    id when None), as :func:`pytest_aaco.history.judge.device_series` builds them. *metric*
    :data:`WALL`: the round log-means (``raw``) or the reference-normalized ones (``normalized``).
    Runs without the figures are skipped. Raises ValueError for an unknown *metric* or *kind*.
    """
    if metric not in (DEVICE, WALL) or kind not in (RAW, NORMALIZED):
        raise ValueError(f"unknown pooled series {metric}/{kind}")
    found: list[tuple[str | None, float]] = []
    for run in history:
        value: float | None = None
        if metric == DEVICE:
            dev = run.get("device_time")
            logs = dev.get("log_means") if isinstance(dev, dict) else None
            if not logs:
                continue
            if kind == RAW:
                value = _mean(list(logs))
            else:
                ref = _reference_device(run, ref_id)
                if ref is None:
                    continue
                value = _mean([float(a) - float(b) for a, b in zip(logs, ref, strict=False)])
        elif kind == RAW:
            rounds = run.get("rounds")
            rows = rounds if isinstance(rounds, (list, tuple)) else []
            logs = [r.get("log_mean") for r in rows if isinstance(r, dict)]
            numbers = [float(x) for x in logs if isinstance(x, (int, float)) and math.isfinite(x)]
            # the run's level as the stored gate takes it: its fastest quarter of rounds
            value = _mean(list(stats.fastest_rounds(numbers))) if len(numbers) == len(logs) else None
        else:
            reference = run.get("reference")
            if not isinstance(reference, dict) or (ref_id is not None and reference.get("id") != ref_id):
                continue
            value = _mean(list(reference.get("normalized") or []))
        if value is not None:
            found.append((run_gpu(run), value))
    return found


@dataclass(frozen=True)
class GpuOffsets:
    """Each physical GPU's offset (ln units, shrunk: a best linear unbiased predictor) from the
    history, its posterior variance and how many runs it rests on; ``tau_sq`` the variance of the
    offsets between GPUs, ``sigma_sq`` the residual variance, ``items`` how many items ran on
    several GPUs. Empty when no item ran on two GPUs."""

    offsets: dict[str, float] = field(default_factory=dict)
    variances: dict[str, float] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)
    tau_sq: float = 0.0
    sigma_sq: float = 0.0
    items: int = 0
    #: the df of the items' residuals about their own means (runs - items), before the offsets took GPUs - 1
    used_df: int = 0

    def of(self, gpu: str | None) -> tuple[float, float]:
        """``(offset, variance)`` of *gpu*: ``(0, 0)`` when offsets are not fitted or the GPU is
        unknown; ``(0, tau_sq)`` for a GPU the history never ran on."""
        if not self.offsets or gpu is None:
            return 0.0, 0.0
        if gpu not in self.offsets:
            return 0.0, self.tau_sq
        return self.offsets[gpu], self.variances[gpu]

    def to_dict(self) -> JSONDict:
        return {"offsets": dict(self.offsets), "variances": dict(self.variances), "runs": dict(self.runs),
                "tau_sq": self.tau_sq, "sigma_sq": self.sigma_sq, "items": self.items, "used_df": self.used_df}


def fit_gpu_offsets(items: Sequence[Sequence[tuple[str | None, float]]], iterations: int = 200) -> GpuOffsets:
    """Fit ``y = μ_item + γ_gpu + ε`` to *items* (per item, ``(gpu, run mean)`` pairs, ln units).

    Only items with runs on at least two known GPUs inform the offsets. The fixed-effect offsets
    ``γ̂`` come from alternating means (backfitting), centred so their run-weighted mean is 0;
    ``σ²`` is the residual variance (df: runs - items - GPUs + 1); ``τ² = max(0, var(γ̂) -
    mean(σ²/n_g))`` (method of moments); each offset is shrunk to ``w γ̂`` with ``w = τ²/(τ² +
    σ²/n_g)``, posterior variance ``w σ²/n_g`` (BLUP of a one-way random effect, Searle, Casella &
    McCulloch 1992, ch. 3). Returns an empty :class:`GpuOffsets` when fewer than 2 GPUs or no
    residual df.
    """
    used = [[(g, float(y)) for g, y in item if g is not None] for item in items]
    used = [item for item in used if len({g for g, _ in item}) >= 2]
    gpus = sorted({g for item in used for g, _ in item})
    if len(gpus) < 2:
        return GpuOffsets()
    n_runs = sum(len(item) for item in used)
    df = n_runs - len(used) - len(gpus) + 1
    if df < 1:
        return GpuOffsets()
    counts = {g: sum(1 for item in used for h, _ in item if h == g) for g in gpus}
    gamma = dict.fromkeys(gpus, 0.0)
    mu = [0.0] * len(used)
    for _ in range(iterations):
        mu = [float(np.mean([y - gamma[g] for g, y in item])) for item in used]
        new = {g: float(np.mean([y - mu[i] for i, item in enumerate(used) for h, y in item if h == g])) for g in gpus}
        centre = sum(new[g] * counts[g] for g in gpus) / n_runs
        new = {g: v - centre for g, v in new.items()}
        moved = max(abs(new[g] - gamma[g]) for g in gpus)
        gamma = new
        if moved < 1e-12:
            break
    resid = [y - mu[i] - gamma[g] for i, item in enumerate(used) for g, y in item]
    sigma_sq = float(np.sum(np.square(resid)) / df)
    spread = float(np.var([gamma[g] for g in gpus], ddof=1))
    tau_sq = max(0.0, spread - float(np.mean([sigma_sq / counts[g] for g in gpus])))
    offsets, variances = {}, {}
    for g in gpus:
        noise = sigma_sq / counts[g]
        w = tau_sq / (tau_sq + noise) if tau_sq + noise > 0 else 0.0
        offsets[g] = w * gamma[g]
        variances[g] = w * noise
    return GpuOffsets(offsets, variances, counts, tau_sq, sigma_sq, len(used), n_runs - len(used))


@dataclass(frozen=True)
class Pool:
    """What one baseline folder's items share for one series: the variance prior of their run
    means after the GPU offsets are taken out (None with fewer than :data:`MIN_ITEMS` items of 2+
    runs) and the offsets (:class:`GpuOffsets`)."""

    prior: stats.VariancePrior | None
    offsets: GpuOffsets
    df: int = 0

    def to_dict(self) -> JSONDict:
        return {"prior": self.prior.to_dict() if self.prior is not None else None, "offsets": self.offsets.to_dict(),
                "df": self.df}


def fit_pool(items: Sequence[Sequence[tuple[str | None, float]]], min_items: int = MIN_ITEMS) -> Pool:
    """The :class:`Pool` of *items* (per item, ``(gpu, run mean)``, ln units): GPU offsets
    (:func:`fit_gpu_offsets`), then the prior (:func:`pytest_aaco.verdict.stats.fit_variance_prior`)
    of each item's sample variance of offset-corrected run means (``runs - 1`` df, items with at
    least 2 runs), ``d0`` capped at :data:`D0_CAP_SHARE` x the df summed over the items."""
    offsets = fit_gpu_offsets(items)
    variances, dfs = [], []
    for item in items:
        if len(item) < 2:
            continue
        ys = np.array([y - offsets.of(g)[0] for g, y in item])
        v = float(np.var(ys, ddof=1))
        if offsets.offsets and len({g for g, _ in item if g is not None}) >= 2:
            # the offsets were fitted on these items' residuals and took GPUs - 1 of their df: undo that
            v *= offsets.used_df / (offsets.used_df - len(offsets.offsets) + 1)
        if v > 0 and math.isfinite(v):
            variances.append(v)
            dfs.append(len(item) - 1)
    if len(variances) < min_items:
        return Pool(None, offsets, int(sum(dfs)))
    prior = stats.fit_variance_prior(variances, dfs)
    if prior is not None:
        cap = D0_CAP_SHARE * float(sum(dfs))
        if prior.d0 > cap:  # the prior cannot hold more information than the histories it came from
            prior = stats.VariancePrior(prior.s0_sq, cap, prior.items)
    return Pool(prior, offsets, int(sum(dfs)))


def pooled_test(current: Sequence[float] | np.ndarray, history: Sequence[tuple[str | None, float]],
                current_gpu: str | None, pool: Pool) -> stats.Comparison | None:
    """The moderated prediction-interval t-test of this run against its history, or None when the
    pool has no prior or the history has fewer than 2 runs.

    *current*: this run's block or round log-means (its mean ``x`` is used); *history*: ``(gpu,
    run mean)`` per history run (:func:`run_means`); *current_gpu*: the GPU this run used. With
    ``y_r`` the history's run means less their GPU's offset and ``x'`` = x less the current GPU's:
    ``estimate = x' - mean(y)``, ``s̃² = (d0 s0² + (H-1) s²)/(d0 + H - 1)``, ``se² = s̃² (1 + 1/H) +
    var(γ_now - mean(γ_r))`` (the offsets' errors taken as independent between GPUs), Student t
    with ``d0 + H - 1`` df (Smyth 2004; see the module docstring). None too when this run's GPU is
    not in the item's history and no offset is fitted for it (no item ran on it and another GPU
    yet): its offset is unknown, so the caller's unpooled test, with its run-to-run prior, decides.
    Raises ValueError when *current* is empty or not finite.
    """
    if pool.prior is None or len(history) < 2:
        return None
    seen = {g for g, _ in history if g is not None}
    if current_gpu is not None and seen and current_gpu not in seen and current_gpu not in pool.offsets.offsets:
        return None  # another GPU, whose offset no item has shown yet: pooling cannot vouch for it
    c = np.asarray(current, dtype=float)
    if c.size == 0 or not np.all(np.isfinite(c)):
        raise ValueError("this run's log-means are empty or not finite")
    off_now = pool.offsets.of(current_gpu)[0]
    ys = np.array([y - pool.offsets.of(g)[0] for g, y in history])
    h = ys.size
    # the offsets' errors, independent between GPUs: error(now) - mean(error(history runs))
    weights: dict[str | None, float] = {current_gpu: 1.0}
    for g, _ in history:
        weights[g] = weights.get(g, 0.0) - 1.0 / h
    var_offsets = sum(w * w * pool.offsets.of(g)[1] for g, w in weights.items())
    s_sq, df = pool.prior.moderate(float(np.var(ys, ddof=1)), float(h - 1))
    df = min(df, 1e6)
    se = max(math.sqrt(s_sq * (1.0 + 1.0 / h) + var_offsets), stats.SE_FLOOR)
    estimate = float(c.mean()) - off_now - float(ys.mean())
    from scipy.stats import t as student_t

    t = estimate / se
    return stats.Comparison(METHOD, estimate, se, float(df), float(student_t.sf(t, df)), float(student_t.cdf(t, df)),
                            int(c.size), int(h))


def pooled_comparison(current: Sequence[float] | np.ndarray, history: Sequence[tuple[str | None, float]],
                      current_gpu: str | None, pool: Pool) -> tuple[stats.Comparison, JSONDict] | None:
    """:func:`pooled_test`, with what it used (``{"s0_sq", "d0", "items", "gpu", "gpu_offset", "gpus"}``: the
    prior's variance (ln units squared), its df and items, this run's GPU, its fitted offset (ln units) and the
    GPUs with an offset), or None when pooling does not apply (no prior, fewer than 2 history runs, a GPU of
    unknown offset). Raises ValueError as :func:`pooled_test` does."""
    comp = pooled_test(current, history, current_gpu, pool)
    if comp is None or pool.prior is None:
        return None
    offset = pool.offsets.of(current_gpu)[0]
    return comp, {"s0_sq": pool.prior.s0_sq, "d0": pool.prior.d0, "items": pool.prior.items, "gpu": current_gpu,
                  "gpu_offset": offset, "gpus": len(pool.offsets.offsets)}


def pooled_pairs(device_time: Mapping[str, object] | None) -> list[tuple[str, str]]:
    """Rows for the HTML report's verdict table from a device-time record's ``pooled`` entry
    (:func:`pytest_aaco.history.judge.device_check`): the pooled prior and the offset of the GPU
    this run used; empty when the device-time test was not pooled. Plain text (the caller escapes it)."""
    pooled = (device_time or {}).get("pooled")
    if not isinstance(pooled, dict):
        return []
    d0 = pooled.get("d0")
    rows = [("device time: run-to-run sd pooled over the runner's items",
             f"{math.sqrt(float(pooled.get('s0_sq') or 0.0)):.3%} ({pooled.get('items')} items,"
             f" {float(d0 if isinstance(d0, (int, float)) else 0.0):.3g} prior df)")]
    if pooled.get("gpu") and pooled.get("gpus"):
        rows.append(("device time: offset of this GPU (fitted, taken out)",
                     f"{math.expm1(float(pooled.get('gpu_offset') or 0.0)):+.2%} ({str(pooled['gpu'])[:16]})"))
    return rows
