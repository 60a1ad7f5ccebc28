"""Analysis and report of the verdict-quality study (studies/verdict_quality.py).

* live verdicts: what the plugin said in each A/A and A/B session (its session bundles);
* offline re-judging of the same recorded data: the plugin's rule through
  ``pytest_aaco.history.judge.judge_history`` (long history = all history runs; short = one history run), a
  naive Welch test on pooled iterations and pytest-benchmark's ``mean:5%`` rule, each replayed over
  the session's items in order (LOND for the plugin's rule);
* a noise model fitted to the unchanged runs and a vectorised simulation (studies/quality_sim.py);
* cost per item from pytest's JUnit XML.
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import quality_runs as qr
import quality_sim as qs
import scipy.stats

OUTCOMES = ("regression", "inconclusive", "no-regression", "improvement")
Q = 0.05
DELTA = 0.05
CONTENTION_LIMIT = 0.1  # --aaco-max-contention's default


# ------------------------------------------------------------------ helpers


def pct(x: float | None, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x * 100:.{digits}f}%"


def rate(k: int, n: int) -> str:
    """``k/n (p%, 95% CI lo-hi%)`` with the Wilson interval."""
    if n == 0:
        return "-"
    lo, hi = wilson(k, n)
    return f"{k}/{n} ({k / n:.1%}; {lo:.1%}-{hi:.1%})"


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return float("nan"), float("nan")
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def table(header: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def rounds_of(result: dict[str, Any]) -> list[np.ndarray]:
    return [np.asarray(r, dtype=float) for r in result.get("latencies_ms") or []]


# ------------------------------------------------------------------ collecting


class Study:
    """Everything recorded: sessions with their item records, junit times and the plan."""

    def __init__(self, args: Any, manifest: dict[str, Any], suite: Path) -> None:
        self.args = args
        self.manifest = manifest
        self.suite = suite
        cfg = manifest.get("config", {})
        models = cfg.get("model_list") or args.model_list
        copies = cfg.get("copies") or args.copies
        self.items = qr.item_names(models, copies)
        self.item_model = {name: model for name, model, _ in self.items}
        self.models = models
        self.sizes = cfg.get("size_list") or args.size_list
        self.sessions = []
        for entry in manifest.get("sessions", []):
            s = dict(entry)
            s["records"] = qr.load_bundle(suite, entry)
            s["times"] = qr.junit_times(suite / "junit" / f"{entry['name']}.xml")
            self.sessions.append(s)
        self.history = [s for s in self.sessions if s["kind"] == "history"]
        self.aa = [s for s in self.sessions if s["kind"] == "aa"]
        self.ab = [s for s in self.sessions if s["kind"] == "ab"]
        self.calib = manifest.get("calibration", {})
        self._prior: Any = None

    @property
    def prior(self) -> Any:
        """The runner's variance prior fitted on the history (see :func:`variance_prior`)."""
        if self._prior is None:
            self._prior = variance_prior(self) or False
        return self._prior or None

    def size_of(self, session: dict[str, Any], item: str) -> int | None:
        """Index into self.sizes of the B variant *item* ran in an A/B session."""
        return self.manifest.get("ab_sizes", {}).get(session["name"], {}).get(item)

    def true_slowdown(self, item: str, k: int) -> float:
        return self.calib[self.item_model[item]]["variants"][k]["true_slowdown"]

    def history_records(self, item: str) -> list[dict[str, Any]]:
        return [s["records"][item] for s in self.history if item in s["records"]]


# ------------------------------------------------------------------ live verdicts


def withheld(verdict: dict[str, Any]) -> bool:
    """A latency regression the contention guard turned into inconclusive (--aaco-max-contention)."""
    return any(n.startswith("other processes used") for n in verdict.get("notes", []))


def live_summary(study: Study) -> dict[str, Any]:
    aa_items, aa_sessions = [], []
    for s in study.aa:
        flags = []
        for name, _, _ in study.items:
            rec = s["records"].get(name)
            if rec is None or not rec.get("verdict"):
                continue
            v = rec["verdict"]
            latency_fa = v["outcome"] == "regression" and v["fails"]
            aa_items.append({"session": s["name"], "item": name, "outcome": v["outcome"], "fails": v["fails"],
                             "latency_fa": latency_fa, "first_look": v.get("confirmed") is not None,
                             "memory": bool(v.get("memory")), "ratio": v.get("ratio"), "mde": v.get("mde"),
                             "unstable": bool(v.get("unstable")), "withheld": withheld(v)})
            flags.append((latency_fa, v["fails"]))
        aa_sessions.append({"session": s["name"], "items": len(flags), "latency_fa": any(f[0] for f in flags),
                            "any_fail": any(f[1] for f in flags), "n_latency_fa": sum(f[0] for f in flags),
                            "n_fail": sum(f[1] for f in flags)})
    ab_items = []
    for s in study.ab:
        for name, model, _ in study.items:
            rec = s["records"].get(name)
            k = study.size_of(s, name)
            if rec is None or not rec.get("verdict") or k is None:
                continue
            v = rec["verdict"]
            ab_items.append({"session": s["name"], "item": name, "model": model, "k": k,
                             "target": study.sizes[k], "true": study.true_slowdown(name, k),
                             "outcome": v["outcome"], "fails": v["fails"],
                             "detected": v["outcome"] == "regression" and v["fails"],
                             "first_look": v.get("confirmed") is not None, "ratio": v.get("ratio"),
                             "mde": v.get("mde"), "level": v.get("level"),
                             "hash_note": any("model file changed" in n for n in v.get("notes", [])),
                             "withheld": withheld(v)})
    return {"aa_items": aa_items, "aa_sessions": aa_sessions, "ab_items": ab_items}


# ------------------------------------------------------------------ offline re-judging


def _result(rec_result: dict[str, Any]) -> Any:
    from pytest_aaco.measure.results import BenchmarkResult, RoundResult

    rounds = [RoundResult(i, lat, 0, 1) for i, lat in enumerate(rounds_of(rec_result))]
    return BenchmarkResult(model=rec_result.get("model", ""), provider="cpu", rounds=rounds, warmup_iterations=0,
                           warmup_latencies_ms=np.empty(0), session_create_ms=0.0, first_run_ms=0.0,
                           providers_used=["CPUExecutionProvider"])


def _baseline(item: str, hist: list[dict[str, Any]]) -> Any:
    from pytest_aaco.history.fingerprint import Fingerprint
    from pytest_aaco.history.store import Baseline

    fields = hist[-1]["fingerprint"]
    history = [{"rounds": h["result"]["rounds"], "summary": h["result"]["summary"], "telemetry": {}} for h in hist]
    return Baseline(path=Path(f"offline-{item}.json"), item=item, fingerprint=fields,
                    fingerprint_id=Fingerprint(fields).id, history=history)


def variance_prior(study: Study) -> Any:
    """The runner's variance prior as the plugin fits it from the baseline folder
    (:func:`pytest_aaco.history.store.runner_variance_prior`): every item's history of >= 3 runs."""
    from pytest_aaco.verdict.stats import fit_variance_prior

    variances, dfs = [], []
    for name, _, _ in study.items:
        hist = study.history_records(name)
        if len(hist) < 3:
            continue
        means = [float(np.mean(r)) for r in _baseline(name, hist).run_round_log_means()]
        variances.append(float(np.var(means, ddof=1)))
        dfs.append(len(means) - 1)
    return fit_variance_prior(variances, dfs)


def judge(rec: dict[str, Any], hist: list[dict[str, Any]], level: float, min_history: int,
          confirm: bool, prior: Any = None, max_contention: float | None = None,
          cores: int = 2) -> dict[str, Any]:
    """The plugin's verdict on recorded data (pytest_aaco.history.judge.judge_history + confirm, with the
    runner's variance *prior* and, when *max_contention* is set, the contention guard)."""
    from pytest_aaco.history.fingerprint import Fingerprint
    from pytest_aaco.history.judge import judge_history
    from pytest_aaco.options import GateSettings
    from pytest_aaco.verdict.finish import confirm as combine
    from pytest_aaco.verdict.finish import under_contention

    settings = GateSettings(threshold=DELTA, min_history=min_history)
    fp = Fingerprint(rec["fingerprint"])
    base = _baseline(rec["nodeid"], hist)
    first = judge_history(_result(rec["result"]), base, fp, settings, level, rec["label"], prior=prior)
    out = {"first": first.outcome, "outcome": first.outcome, "ratio": first.ratio, "p": first.p_value,
           "mde": first.mde, "missing_confirmation": False}
    final, looks = first, [rec["result"]]
    if confirm and first.outcome == "regression":
        conf = (rec["result"] or {}).get("confirmation")
        if conf is None:
            out["missing_confirmation"] = True
        else:
            second = judge_history(_result(conf), base, fp, settings, level, rec["label"], prior=prior)
            final = combine(first, second)
            looks.append(conf)
    if max_contention is not None:
        busy = [others_cores(x, cores) for x in looks]
        final = under_contention(final, max([max(b, 0.0) for b in busy if np.isfinite(b)], default=0.0),
                                 max_contention)
    out["outcome"] = final.outcome
    out["fails"] = out["outcome"] == "regression"
    return out


def naive_rules(rec: dict[str, Any], base_rec: dict[str, Any]) -> dict[str, bool]:
    import quality_calib as qc

    cur = np.concatenate(rounds_of(rec["result"]))
    base = np.concatenate(rounds_of(base_rec["result"]))
    p = scipy.stats.ttest_ind(cur, base, equal_var=False, alternative="greater").pvalue
    return {"naive_welch": bool(p <= 0.05), "pb_mean5": qc.pb_rule_fails(float(cur.mean()), float(base.mean()))}


def replay(study: Study, session: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Every rule over one gated session's items in order. The plugin's rules run LOND over the
    session's m items; single-run rules are evaluated against each history run in turn."""
    from pytest_aaco.verdict.stats import LondFdr

    m = len(study.items)
    h = len(study.history)
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    lond_long, lond_first = LondFdr(Q, m), LondFdr(Q, m)
    lond_short = [LondFdr(Q, m) for _ in range(h)]
    # the current rule: variance moderated towards the other items, contention guard at 0.1 cores
    current = {"prior": study.prior, "max_contention": CONTENTION_LIMIT,
            "cores": int(study.manifest.get("machine", {}).get("cores") or 2)}
    for name, _, _ in study.items:
        rec = session["records"].get(name)
        hist = study.history_records(name)
        if rec is None or not rec.get("result") or len(hist) < 1:
            continue
        if len(hist) >= 3:
            lv = lond_long.next_level()
            r = judge(rec, hist, lv, min_history=min(5, len(hist)), confirm=True, **current)
            lond_long.record(r["fails"])
            out["aaco"].append({"item": name, "level": lv, **r})
            lv = lond_first.next_level()
            r = judge(rec, hist, lv, min_history=min(5, len(hist)), confirm=False, **current)
            lond_first.record(r["fails"])
            out["aaco_first_look"].append({"item": name, "level": lv, **r})
        for j, base in enumerate(hist):
            lv = lond_short[j].next_level()
            r = judge(rec, [base], lv, min_history=5, confirm=False, max_contention=CONTENTION_LIMIT,
                      cores=current["cores"])
            lond_short[j].record(r["fails"])
            out["aaco_h1"].append({"item": name, "base": j, "level": lv, **r})
            for rule, fails in naive_rules(rec, base).items():
                out[rule].append({"item": name, "base": j, "fails": fails})
    return out


RULES = [
    ("aaco", "pytest-aaco as built: 5-run history, prediction interval (variance moderated across items), LOND,"
             " confirmation, contention guard (0.1 cores)"),
    ("aaco_first_look", "pytest-aaco first look only (no confirmation)"),
    ("aaco_h1", "pytest-aaco rule, 1-run history (Welch on rounds + 2% run term), LOND, first look, contention"
                " guard"),
    ("naive_welch", "naive Welch on pooled iterations vs 1 saved run, one-sided alpha 0.05"),
    ("pb_mean5", "pytest-benchmark --benchmark-compare-fail=mean:5% vs 1 saved run"),
]


def offline_tables(study: Study) -> dict[str, Any]:
    res: dict[str, Any] = {"aa": {}, "ab": {}, "agreement": None}
    replays = {s["name"]: replay(study, s) for s in study.aa + study.ab}
    # agreement of the offline replay of the plugin's rule with what the plugin said live
    agree = total = 0
    for s in study.aa + study.ab:
        for row in replays[s["name"]].get("aaco", []):
            v = (s["records"][row["item"]] or {}).get("verdict") or {}
            total += 1
            agree += v.get("outcome") == row["outcome"]
    res["agreement"] = (agree, total)
    for rule, _ in RULES:
        # A/A: per item and per session (a session, or a (session, saved run) pair, with any failure)
        items = sessions = fa_items = fa_sessions = 0
        for s in study.aa:
            rows = replays[s["name"]].get(rule, [])
            groups: dict[Any, list[bool]] = defaultdict(list)
            for row in rows:
                groups[row.get("base", 0)].append(row["fails"])
            for flags in groups.values():
                items += len(flags)
                fa_items += sum(flags)
                sessions += 1
                fa_sessions += any(flags)
        res["aa"][rule] = {"items": items, "fa_items": fa_items, "sessions": sessions, "fa_sessions": fa_sessions}
        det: dict[int, list[int]] = {k: [0, 0] for k in range(len(study.sizes))}
        outcomes: dict[int, Counter[str]] = {k: Counter() for k in range(len(study.sizes))}
        for s in study.ab:
            for row in replays[s["name"]].get(rule, []):
                k = study.size_of(s, row["item"])
                if k is None:
                    continue
                det[k][0] += row["fails"]
                det[k][1] += 1
                if "outcome" in row:
                    outcomes[k][row["outcome"]] += 1
        res["ab"][rule] = {"det": det, "outcomes": outcomes}
    missing = sum(row.get("missing_confirmation", False) for r in replays.values() for row in r.get("aaco", []))
    res["missing_confirmation"] = missing
    return res


# ------------------------------------------------------------------ noise fit


def fit_noise(study: Study) -> dict[str, Any]:
    unchanged = study.history + study.aa
    per_item = {}
    for name, _, _ in study.items:
        runs = [rounds_of(s["records"][name]["result"]) for s in unchanged
                if name in s["records"] and s["records"][name].get("result")]
        if len(runs) >= 2:
            per_item[name] = qs.describe_runs(runs)
    per_model = {}
    for model in study.models:
        figs = [f for n, f in per_item.items() if study.item_model[n] == model]
        if not figs:
            continue
        pool = np.concatenate([np.asarray(f["run_means"]) - np.median(f["run_means"]) for f in figs])
        pooled = {
            "runs": sum(f["runs"] for f in figs),
            "ms": float(np.exp(np.mean([math.log(f["ms"]) for f in figs]))),
            "between_sd": float(math.sqrt(np.mean([f["between_sd"] ** 2 for f in figs]))),
            "within_sd": float(math.sqrt(np.mean([f["within_sd"] ** 2 for f in figs]))),
            "iter_sd": float(math.sqrt(np.mean([f["iter_sd"] ** 2 for f in figs]))),
            "rho": float(np.mean([f["rho"] for f in figs])),
            "n_iter": int(np.median([f["n_iter"] for f in figs])),
            "rounds": int(np.median([f["rounds"] for f in figs])),
            "between_sd_items": [f["between_sd"] for f in figs],
        }
        pooled["run_dev_p90"] = float(np.expm1(np.quantile(pool, 0.9)))
        pooled["run_dev_max"] = float(np.expm1(pool.max()))
        pooled["slow_share"] = float(np.mean(pool > math.log(1.05)))
        per_model[model] = {"figures": pooled, "noise": qs.noise_from_figures(model, pooled), "pool": pool}
    # run means matrix (sessions x items) for the session component and the history/gate offset
    names = [n for n, _, _ in study.items if n in per_item]
    mat, kinds = [], []
    for s in unchanged:
        row = []
        for n in names:
            rec = s["records"].get(n)
            row.append(np.mean([r["log_mean"] for r in rec["result"]["rounds"]]) if rec and rec.get("result")
                       else np.nan)
        if not np.any(np.isnan(row)):
            mat.append(row)
            kinds.append(s["kind"])
    mat_a = np.array(mat)
    session_sd = qs.session_component(mat_a) if mat_a.shape[0] >= 3 else 0.0
    offset = None
    if mat_a.shape[0] >= 4:
        dev = (mat_a - mat_a.mean(axis=0)).mean(axis=1)
        hist_dev = dev[[k == "history" for k in kinds]]
        gate_dev = dev[[k != "history" for k in kinds]]
        if hist_dev.size >= 2 and gate_dev.size >= 2:
            t = scipy.stats.ttest_ind(gate_dev, hist_dev, equal_var=False)
            offset = {"gate_minus_history": float(np.expm1(gate_dev.mean() - hist_dev.mean())),
                      "p_two_sided": float(t.pvalue), "hist_sessions": int(hist_dev.size),
                      "gate_sessions": int(gate_dev.size)}
    return {"per_item": per_item, "per_model": per_model, "session_sd": session_sd, "offset": offset,
            "episodes": episodes(study),
            "confirm": confirmation_rates(study)}


def episodes(study: Study, slow: float = 0.10, lags: tuple[int, ...] = (1, 2, 3, 5, 10)) -> dict[str, Any]:
    """How long slow phases last: an unchanged run is 'slow' when its run mean is more than *slow*
    above the item's median run; P(item at position p + k slow | item at p slow) within a session."""
    unchanged = study.history + study.aa
    names = [n for n, _, _ in study.items]
    mat = []
    for s in unchanged:
        row = [np.mean([r["log_mean"] for r in s["records"][n]["result"]["rounds"]]) if n in s["records"] else np.nan
               for n in names]
        if not np.any(np.isnan(row)):
            mat.append(row)
    if len(mat) < 2:
        return {}
    dev = np.array(mat) - np.median(np.array(mat), axis=0)
    flag = dev > math.log1p(slow)
    out = {"base": float(flag.mean()), "per_session": flag.mean(axis=1).tolist(), "lags": {}}
    for k in lags:
        if k < flag.shape[1]:
            a, b = flag[:, :-k].ravel(), flag[:, k:].ravel()
            out["lags"][k] = float(b[a].mean()) if a.any() else float("nan")
    return out


def confirmation_rates(study: Study) -> dict[str, Any]:
    """Live A/A first-look regressions and how many of them the confirmation look confirmed."""
    first = confirmed = 0
    for s in study.aa:
        for rec in s["records"].values():
            v = (rec or {}).get("verdict") or {}
            if v.get("confirmed") is not None:
                first += 1
                confirmed += bool(v.get("confirmed"))
    return {"first": first, "confirmed": confirmed, "ratio": confirmed / first if first else None}


def others_cores(result: dict[str, Any], cores: int) -> float:
    """CPU (in cores) used by other processes during a measured phase, from the plugin's own
    telemetry: system CPU % (of all cores) x cores - this process's CPU % (of one core)."""
    t = (result.get("telemetry") or {}).get("summary") or {}
    try:
        return t["system_cpu_percent"]["mean"] * cores / 100 - t["process_cpu_percent"]["mean"] / 100
    except (KeyError, TypeError):
        return float("nan")


def contention(study: Study, live: dict[str, Any], limit: float = 0.1) -> dict[str, Any]:
    """Items split by the telemetry's 'other processes' CPU during the looks, and the counterfactual
    rule 'fail only when no look saw other processes use more than *limit* cores'."""
    cores = int(study.manifest.get("machine", {}).get("cores") or 2)
    out: dict[str, Any] = {"limit": limit}
    for kind, sessions in (("aa", study.aa), ("ab", study.ab)):
        rows = []
        for s in sessions:
            for name, _, _ in study.items:
                rec = s["records"].get(name)
                if not rec or not rec.get("verdict"):
                    continue
                res = rec["result"]
                looks = [others_cores(res, cores)]
                if res.get("confirmation"):
                    looks.append(others_cores(res["confirmation"], cores))
                v = rec["verdict"]
                rows.append({"session": s["name"], "item": name, "k": study.size_of(s, name),
                             "fails": v["outcome"] == "regression" and v["fails"],
                             "contended": any(x > limit for x in looks), "first_look_others": looks[0]})
        out[kind] = rows
    return out


# ------------------------------------------------------------------ simulation


def calibrate_persistence(study: Study, fit: dict[str, Any], models: list[str], copies: int, rounds: int,
                          rng: np.random.Generator, log: Any, sessions: int = 300) -> float:
    """Probability that the confirmation look keeps the first look's run offset, chosen on a grid so
    that the empirical simulation's A/A share of confirmed first-look regressions matches the live one."""
    target = fit["confirm"].get("ratio")
    if target is None:
        return 1.0
    items = [fit["per_model"][m]["noise"] for _ in range(copies) for m in models]
    pools = [fit["per_model"][m]["pool"] for _ in range(copies) for m in models]
    best, grid = (float("inf"), 1.0), []
    for c in (0.0, 0.25, 0.5, 0.75, 0.9, 1.0):
        sim = qs.simulate(items, sessions, 5, rounds, 0.0, c, rng, offset_pools=pools)
        r = qs.evaluate(sim, np.zeros((sessions, len(items))), DELTA, Q)["aaco"]
        first = int(np.sum(r["first"] == qs.REGRESSION))
        ratio = float(np.sum(r["fails"])) / first if first else float("nan")
        grid.append((c, ratio))
        if abs(ratio - target) < best[0]:
            best = (abs(ratio - target), c)
    fit["confirm"]["grid"] = grid
    fit["confirm"]["persistence"] = best[1]
    log(f"confirmation persistence: live ratio {target:.2f}, grid {grid} -> {best[1]}")
    return best[1]


def simulate_all(study: Study, fit: dict[str, Any], sessions: int, seed: int, log: Any) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    rounds = int(study.args.rounds)
    models = [m for m in study.models if m in fit["per_model"]]
    copies = max(1, len(study.items) // max(1, len(study.models)))
    fitted = [fit["per_model"][m]["noise"] for _ in range(copies) for m in models]
    conf = calibrate_persistence(study, fit, models, copies, rounds, rng, log)
    generic = dict(name="generic", ms=10.0, n_iter=35, sd_round=0.0, sd_iter=0.03)
    pools = [fit["per_model"][m]["pool"] for _ in range(copies) for m in models]
    scenarios = [
        ("fitted", "normal noise model fitted to this study's unchanged runs", fitted, fit["session_sd"], conf),
        ("empirical", "this study's run offsets resampled (episodic slow phases kept), fitted round and"
                      " iteration noise", fitted, 0.0, conf),
        ("ar1", "published: AR(1) iterations, rho=0.5, 3% iteration sd, no run offset",
         [qs.ItemNoise(**generic, sd_run=0.0, rho=0.5)] * 20, 0.0, 1.0),
        ("offset2", "published: 2% run-to-run offset, rho=0.2, 3% iteration sd",
         [qs.ItemNoise(**generic, sd_run=0.02, rho=0.2)] * 20, 0.0, conf),
    ]
    checked = None
    for key, label, items, session_sd, corr in scenarios:
        hist = 20 if key in ("fitted", "empirical", "offset2") else 5
        log(f"simulating {sessions} sessions: {label}")
        sim = qs.simulate(items, sessions, hist, rounds, session_sd, corr, rng,
                          offset_pools=pools if key == "empirical" else None)
        if checked is None:
            checked = qs.cross_check(sim, rng)
        m = len(items)
        zero = np.zeros((sessions, m))
        variants = {"": 5, "_h10": 10, "_h20": 20} if key in ("fitted", "empirical", "offset2") else {"": 5}
        res: dict[str, Any] = {"label": label, "items": [it.to_dict() for it in items[:len(models) or 1]],
                               "session_sd": session_sd, "confirm_corr": corr, "rules": {}}
        def keep(rule: str, suffix: str) -> bool:
            return not suffix or rule in ("aaco", "aaco_first_look", "mod", "mod_2runs", "mod_3runs", "mod_3runs_half",
                                          "pi_2runs")

        for suffix, use in variants.items():
            aa = qs.evaluate(sim, zero, DELTA, Q, history=use, proposals=True)
            for rule, r in aa.items():
                if not keep(rule, suffix):
                    continue
                entry = res["rules"].setdefault(rule + suffix, {})
                entry["fa_item"] = float(r["fails"].mean())
                entry["fa_session"] = float(r["fails"].any(axis=1).mean())
                if "outcome" in r:
                    entry["aa_outcomes"] = {qs.OUTCOME_NAMES[c]: float(np.mean(r["outcome"] == c)) for c in
                                            qs.OUTCOME_NAMES}
                    entry["aa_noreg05"] = float(np.mean(r["noreg05"]))
            changed = np.arange(sessions) % m
            for size in study.sizes:
                shift = zero.copy()
                shift[np.arange(sessions), changed] = math.log1p(size)
                ev = qs.evaluate(sim, shift, DELTA, Q, history=use, proposals=True)
                for rule, r in ev.items():
                    if not keep(rule, suffix):
                        continue
                    entry = res["rules"][rule + suffix]
                    hit = r["fails"][np.arange(sessions), changed]
                    entry.setdefault("det", {})[f"{size:.2f}"] = float(hit.mean())
                    if "outcome" in r:
                        o = r["outcome"][np.arange(sessions), changed]
                        entry.setdefault("outcomes", {})[f"{size:.2f}"] = {
                            qs.OUTCOME_NAMES[c]: float(np.mean(o == c)) for c in qs.OUTCOME_NAMES}
                        entry.setdefault("mde", {})[f"{size:.2f}"] = float(
                            np.median(r["mde"][np.arange(sessions), changed]))
                    if key in ("fitted", "empirical") and not suffix:
                        per_model = entry.setdefault("det_by_model", {})
                        for j, model in enumerate(models):
                            sel = (changed % len(models)) == j
                            per_model.setdefault(model, {})[f"{size:.2f}"] = float(hit[sel].mean())
        out[key] = res
    out["cross_check"] = checked
    out["sessions"] = sessions
    return out


# ------------------------------------------------------------------ cost


def cost_item_s(study: Study) -> float:
    """Median wall seconds of an item (all sessions)."""
    times = [t for s in study.sessions for t in s["times"].values()]
    return float(np.median(times)) if times else float("nan")


def cost_summary(study: Study) -> dict[str, Any]:
    per_model: dict[str, list[float]] = defaultdict(list)
    per_model_conf: dict[str, list[float]] = defaultdict(list)
    ms: dict[str, list[float]] = defaultdict(list)
    overhead = []
    for s in study.aa + study.ab + study.history:
        total = 0.0
        for name, t in s["times"].items():
            total += t
            rec = s["records"].get(name) or {}
            res = rec.get("result") or {}
            model = study.item_model.get(name)
            if model is None:
                continue
            if s["kind"] == "aa":
                ms[model].append(res.get("summary", {}).get("mean_ms", float("nan")))
            if s["kind"] != "history":
                (per_model_conf if res.get("confirmation") else per_model)[model].append(t)
        if s["times"]:
            overhead.append(s["wall_s"] - total)
    rows = {}
    for model in study.models:
        plain = per_model.get(model, [])
        conf = per_model_conf.get(model, [])
        both = plain + conf
        rows[model] = {
            "ms": float(np.median(ms[model])) if ms.get(model) else float("nan"),
            "n": len(both), "median_s": float(np.median(both)) if both else float("nan"),
            "max_s": float(np.max(both)) if both else float("nan"),
            "p95_s": float(np.percentile(both, 95)) if both else float("nan"),
            "plain_median_s": float(np.median(plain)) if plain else float("nan"),
            "confirmed_n": len(conf), "confirmed_median_s": float(np.median(conf)) if conf else float("nan"),
        }
    rss: dict[str, list[tuple[float, float]]] = defaultdict(list)
    first, last = study.items[0][0], study.items[-1][0]
    for s in study.history + study.aa:
        try:
            a = s["records"][first]["result"]["telemetry"]["summary"]["rss_mb"]["max"]
            b = s["records"][last]["result"]["telemetry"]["summary"]["rss_mb"]["max"]
        except (KeyError, TypeError):
            continue
        rss[s["kind"]].append((a, b))
    return {"per_model": rows, "session_overhead_s": float(np.median(overhead)) if overhead else float("nan"),
            "rss": {k: (float(np.median([x[0] for x in v])), float(np.median([x[1] for x in v])))
                    for k, v in rss.items()},
            "session_wall": {k: float(np.median([s["wall_s"] for s in getattr(study, k)])) if getattr(study, k)
                             else float("nan") for k in ("history", "aa", "ab")}}


# ------------------------------------------------------------------ report


def _load_text(study: Study) -> tuple[str, dict[str, Any]]:
    samples = study.manifest.get("load_samples", [])
    whole = qr.summarize_load(samples)
    waits = study.manifest.get("waits", [])
    lines = []
    for w in waits:
        if w.get("waited_s") is None:
            lines.append("not waited for (--wait-load 0)")
        else:
            lines.append(f"waited {w.get('waited_s', 0)} s for the 1-min load average to drop below"
                         f" {study.manifest['config'].get('wait_load')} (at start: {w.get('load1_at_start')},"
                         f" {'reached' if w.get('quiet') else 'NOT reached, started anyway'})")
    return "; ".join(lines), whole


def build_report(args: Any, manifest: dict[str, Any], suite: Path, log: Any = print) -> str:
    study = Study(args, manifest, suite)
    log("live verdicts")
    live = live_summary(study)
    log("offline re-judging")
    offline = offline_tables(study)
    log("noise fit")
    fit = fit_noise(study)
    sim = simulate_all(study, fit, args.sim_sessions, args.seed, log) if fit["per_model"] else {}
    cost = cost_summary(study)
    return render(study, live, offline, fit, sim, cost, args)


def _targets(study: Study, live: dict[str, Any], fit: dict[str, Any], sim: dict[str, Any],
             cost: dict[str, Any]) -> list[list[str]]:
    rows = []
    aa_items = live["aa_items"]
    n_lat = sum(r["latency_fa"] for r in aa_items)
    emp = (sim.get("empirical") or {}).get("rules", {}).get("aaco", {})
    nor = (sim.get("fitted") or {}).get("rules", {}).get("aaco", {})
    quiet = {x["name"] for x in study.aa if ((x.get("load") or {}).get("others_cores_mean") or 0) < 0.1}
    q_items = [r for r in aa_items if r["session"] in quiet]
    live_item = n_lat / max(1, len(aa_items))
    rows.append(["false alarms per item <= 1%",
                 f"live {rate(n_lat, len(aa_items))} (quiet sessions only:"
                 f" {rate(sum(r['latency_fa'] for r in q_items), len(q_items))}); simulated: resampled offsets"
                 f" {pct(emp.get('fa_item'), 2)}, normal model {pct(nor.get('fa_item'), 2)}",
                 "met" if live_item <= 0.01 and (emp.get("fa_item") or 0) <= 0.01 else "MISSED"])
    sess = live["aa_sessions"]
    n_sl = sum(s["latency_fa"] for s in sess)
    rows.append([f"false alarms per session of {len(study.items)} items <= 5%",
                 f"live {rate(n_sl, len(sess))}; simulated: resampled offsets {pct(emp.get('fa_session'), 1)},"
                 f" normal model {pct(nor.get('fa_session'), 1)}",
                 "met" if n_sl / max(1, len(sess)) <= 0.05 and (emp.get("fa_session") or 0) <= 0.05 else "MISSED"])
    ab = live["ab_items"]
    for size, goal in ((0.10, 0.95), (0.05, 0.80)):
        ks = [k for k, s in enumerate(study.sizes) if abs(s - size) < 1e-9]
        if not ks:
            continue
        sel = [r for r in ab if r["k"] == ks[0]]
        det = sum(r["detected"] for r in sel)
        s_det = emp.get("det", {}).get(f"{size:.2f}")
        oc = Counter(r["outcome"] for r in sel)
        mdes = [r["mde"] for r in sel if r["mde"] is not None]
        text = (f"live {rate(det, len(sel))}; simulated (resampled offsets) {pct(s_det, 1)}; live outcomes: "
                + ", ".join(f"{o} {oc.get(o, 0)}" for o in OUTCOMES)
                + (f", median MDE {pct(statistics.median(mdes), 0)}" if mdes else ""))
        if size == 0.05:
            quiet_models = [m for m, v in fit["per_model"].items() if v["figures"]["between_sd"] <= 0.02]
            if not quiet_models:
                verdict = ("not applicable: no model's between-run CV is <= 2% here (see the noise table); the"
                           " required inconclusive-with-MDE answer: "
                           + ("met" if oc.get("no-regression", 0) == 0 else "MISSED"))
            else:
                by_model = emp.get("det_by_model", {})
                ok = all((by_model.get(m, {}).get("0.05") or 0) >= goal for m in quiet_models)
                verdict = "met" if ok else "MISSED"
        else:
            verdict = "met" if (s_det or 0) >= goal and det / max(1, len(sel)) >= goal else "MISSED"
        rows.append([f"detection of a {size:.0%} slowdown >= {goal:.0%}", text, verdict])
    small = {m: v for m, v in cost["per_model"].items() if v["ms"] <= 40}
    worst_med = max((v["median_s"] for v in small.values()), default=float("nan"))
    worst_p95 = max((v["p95_s"] for v in small.values()), default=float("nan"))
    worst_max = max((v["max_s"] for v in small.values()), default=float("nan"))
    rows.append(["wall time per item <= 10 s (models <= 40 ms/iteration)",
                 f"slowest model: median {worst_med:.1f} s, p95 {worst_p95:.1f} s; worst single item {worst_max:.1f} s",
                 "met" if worst_max <= 10 else ("met at the median and p95, not for every item" if worst_p95 <= 10
                                                else "MISSED")])
    return rows


def render(study: Study, live: dict[str, Any], offline: dict[str, Any], fit: dict[str, Any], sim: dict[str, Any],
           cost: dict[str, Any], args: Any) -> str:
    m = study.manifest
    mach = m.get("machine", {})
    load_line, load_all = _load_text(study)
    cmd = m.get("commands", [{}])
    out: list[str] = []
    w = out.append
    w("# Verdict quality: false alarms, detection and cost of the gate")
    w("")
    measured = [str(c.get("at", ""))[:10] for c in cmd if c.get("at")]
    date = measured[0] if measured else dt.date.today().isoformat()  # the day the measurements started
    w(f"Date: {date}. Produced by `studies/verdict_quality.py` (issue 3); the tables"
      " below are generated, the discussion at the end is written from them.")
    w("")
    w("Commands that produced this file: the measurements (run in the background with nohup), then the analysis"
      " of the recorded data and this report:")
    w("")
    w("```console")
    for c in [*cmd, getattr(args, "command", {})]:
        if c:
            w("$ " + " ".join(c.get("argv", [])) + f"    # started {c.get('at', '')}")
    w("```")
    w("")
    w("## Machine and conditions")
    w("")
    w(table(["what", "value"], [
        ["CPU", f"{mach.get('cpu_model')} ({mach.get('cores')} cores, {mach.get('memory_gb')} GB)"],
        ["software", f"Python {mach.get('python')}, onnxruntime {mach.get('onnxruntime')} (CPUExecutionProvider),"
                     f" numpy {mach.get('numpy')}, scipy {mach.get('scipy')}, kernel {mach.get('kernel')}"],
        ["load before measuring", load_line or "-"],
        ["1-min load average during the runs", f"mean {load_all.get('load1_mean')}, max {load_all.get('load1_max')}"
                                               f" ({load_all.get('n')} samples every 10 s; includes the study's own"
                                               " benchmark process, which keeps about 2 cores busy)"],
        ["CPU used by other processes during the runs", f"mean {load_all.get('others_cores_mean')} cores"
                                                        " (system busy time minus this study's process tree)"],
        ["sessions", f"{len(study.history)} history, {len(study.aa)} A/A, {len(study.ab)} A/B; skipped for the time"
                     f" budget: {', '.join(m.get('skipped_sessions', [])) or 'none'}"],
        ["items per session", f"{len(study.items)}: {', '.join(study.models)} x"
                              f" {len(study.items) // max(1, len(study.models))} copies, interleaved"],
        ["plugin settings", f"--aaco-rounds={study.args.rounds}, iterations auto (~0.35 s rounds), threshold 5%,"
                            f" FDR 0.05 (LOND over {len(study.items)} items), confirmation on, min history 5"
                            + (f"; extra: {m['config'].get('plugin_args')}" if m["config"].get("plugin_args") else "")],
    ]))
    w("")
    w("Per session (1-min load average mean / max during the session, CPU of other processes):")
    w("")
    fa_by = {x["session"]: x for x in live["aa_sessions"]}
    det_by: dict[str, list[int]] = defaultdict(list)
    for r in live["ab_items"]:
        det_by[r["session"]].append(r["detected"])

    def verdicts(s: dict[str, Any]) -> str:
        if s["kind"] == "aa":
            return f"{fa_by[s['name']]['n_latency_fa']} false alarm(s)"
        if s["kind"] == "ab":
            return f"{sum(det_by[s['name']])} of {len(det_by[s['name']])} detected"
        return "saved"

    w(table(["session", "kind", "wall s", "load mean", "load max", "others' cores", "failed items / verdicts"],
            [[s["name"], s["kind"], f"{s['wall_s']:.0f}", (s.get("load") or {}).get("load1_mean"),
              (s.get("load") or {}).get("load1_max"), (s.get("load") or {}).get("others_cores_mean"), verdicts(s)]
             for s in study.sessions]))
    w("")
    # headline
    w("## Headline")
    w("")
    w(table(["target", "measured", "verdict"], _targets(study, live, fit, sim, cost)))
    w("")
    # calibration
    w("## Calibrated slowdowns (A/B)")
    w("")
    w("Each B variant is the model plus `extra_work` (a chain of MatMul+Tanh steps). Its true slowdown was"
      " measured outside the plugin: one InferenceSession per variant, `session.intra_op.allow_spinning=0`,"
      f" blocks of ~0.25 s in a fresh random order per cycle, {m['config'].get('calib_cycles')} cycles;"
      " slowdown = mean over cycles of the B/A ratio of block geometric means (± 1 se).")
    w("")
    costs = m.get("step_cost_ms", {})
    if costs:
        w("Cost of one extra step, timed alone: " + ", ".join(f"{k}x{k}: {float(v) * 1000:.0f} µs"
                                                              for k, v in costs.items()) + ".")
        w("")
    rows = []
    for model in study.models:
        c = study.calib.get(model)
        if not c:
            continue
        rows.append([model, f"{c['base_ms']:.2f}"] + [
            f"{v['true_slowdown'] * 100:+.1f}% ± {v['se_log'] * 100:.1f}"
            f" (pred. {v.get('predicted', float('nan')) * 100:+.1f}%;"
            f" {v['extra_work']['matmuls']}x{v['extra_work']['size']})" for v in c["variants"]])
    w(table(["model", "A ms (no spin)"] + [f"target {s:.0%}: measured ± se (predicted; steps)" for s in study.sizes],
            rows))
    w("")
    # live A/A
    w("## A/A: nothing changed (live plugin verdicts)")
    w("")
    aa = live["aa_items"]
    oc = Counter(r["outcome"] for r in aa)
    w(f"{len(aa)} gated items in {len(live['aa_sessions'])} sessions, each against the {len(study.history)}-run"
      " history.")
    w("")
    w(table(["measure", "rate (95% Wilson CI)"], [
        ["latency false alarm per item (regression, confirmed)", rate(sum(r["latency_fa"] for r in aa), len(aa))],
        ["first-look regression per item (before confirmation)", rate(sum(r["first_look"] for r in aa), len(aa))],
        ["item failed for any reason (latency, memory)", rate(sum(r["fails"] for r in aa), len(aa))],
        ["item flagged with a memory regression", rate(sum(r["memory"] for r in aa), len(aa))],
        ["latency regression withheld as inconclusive (other processes > 0.1 cores)",
         rate(sum(r["withheld"] for r in aa), len(aa))],
        ["session with >= 1 latency false alarm", rate(sum(s["latency_fa"] for s in live["aa_sessions"]),
                                                       len(live["aa_sessions"]))],
        ["session with >= 1 failed item", rate(sum(s["any_fail"] for s in live["aa_sessions"]),
                                               len(live["aa_sessions"]))],
    ]))
    w("")
    w("Outcome distribution (A/A): " + ", ".join(f"{o} {oc.get(o, 0)}" for o in OUTCOMES)
      + f"; median MDE {pct(statistics.median([r['mde'] for r in aa if r['mde'] is not None]) if aa else None)}.")
    w("")
    quiet = [x for x in study.aa if ((x.get("load") or {}).get("others_cores_mean") or 0) < 0.1]
    quiet_names = {x["name"] for x in quiet}
    q_items = [r for r in aa if r["session"] in quiet_names]
    q_sess = [x for x in live["aa_sessions"] if x["session"] in quiet_names]
    busy_fa = sum(r["latency_fa"] for r in aa if r["session"] not in quiet_names)
    w(f"Sessions in which other processes used < 0.1 cores on average ({len(quiet)} of {len(study.aa)}):"
      f" latency false alarms per item {rate(sum(r['latency_fa'] for r in q_items), len(q_items))}, sessions with"
      f" one or more {rate(sum(x['latency_fa'] for x in q_sess), len(q_sess))}; the other"
      f" {len(study.aa) - len(quiet)} sessions: per item {rate(busy_fa, len(aa) - len(q_items))}.")
    w("")
    cont = contention(study, live)
    lim = cont["limit"]
    ca = cont["aa"]
    cb = cont["ab"]
    w(f"Contention seen by the plugin's own telemetry (other processes' CPU = system CPU x cores - the test"
      f" process's CPU, mean over the measured rounds): A/A items where a look saw other processes use > {lim}"
      f" cores: {rate(sum(r['fails'] for r in ca if r['contended']), sum(r['contended'] for r in ca))} failed;"
      " items where no look did: "
      f"{rate(sum(r['fails'] for r in ca if not r['contended']), sum(not r['contended'] for r in ca))}"
      " failed. Counterfactual rule 'a confirmed regression fails only if no look saw contention (else"
      f" inconclusive, re-run)': A/A false alarms {rate(sum(r['fails'] and not r['contended'] for r in ca), len(ca))};"
      " A/B detections kept: " + ", ".join(
          f"{s:.0%} {sum(r['fails'] and not r['contended'] for r in cb if r['k'] == k)}/"
          f"{sum(r['fails'] for r in cb if r['k'] == k)}" for k, s in enumerate(study.sizes)) + ".")
    w("")
    # live A/B
    w("## A/B: calibrated slowdowns (live plugin verdicts)")
    w("")
    ab = live["ab_items"]
    rows = []
    for k, size in enumerate(study.sizes):
        sel = [r for r in ab if r["k"] == k]
        if not sel:
            continue
        oc = Counter(r["outcome"] for r in sel)
        trues = [r["true"] for r in sel]
        ratios = [r["ratio"] - 1 for r in sel if r["ratio"] is not None]
        rows.append([f"{size:.0%}", f"{np.mean(trues) * 100:+.1f}%", f"{np.median(ratios) * 100:+.1f}%" if ratios
                     else "-", rate(sum(r["detected"] for r in sel), len(sel)),
                     rate(sum(r["first_look"] for r in sel), len(sel))]
                    + [oc.get(o, 0) for o in OUTCOMES]
                    + [pct(statistics.median([r["mde"] for r in sel if r["mde"] is not None]))])
    w(table(["target", "true (interleaved)", "median measured", "detected (confirmed regression)", "first look"]
            + list(OUTCOMES) + ["median MDE"], rows))
    w("")
    w("Regressions withheld as inconclusive by the contention guard (other processes > 0.1 cores): "
      + ", ".join(f"{s:.0%} {sum(r['withheld'] for r in ab if r['k'] == k)}" for k, s in enumerate(study.sizes))
      + ".")
    w("")
    notes = sum(r["hash_note"] for r in ab)
    w(f"Every A/B item was gated against its A history; {notes} of {len(ab)} verdicts carry the note that the"
      " model file changed since the baseline was recorded.")
    w("")
    det_model = defaultdict(lambda: defaultdict(list))
    for r in ab:
        det_model[r["model"]][r["k"]].append(r["detected"])
    w(table(["model"] + [f"{s:.0%}" for s in study.sizes],
            [[mo] + [f"{sum(det_model[mo][k])}/{len(det_model[mo][k])}" if det_model[mo][k] else "-"
                     for k in range(len(study.sizes))] for mo in study.models]))
    w("")
    # offline side by side
    w("## Side by side on the same recorded data (offline re-judging)")
    w("")
    agree, total = offline["agreement"]
    w(f"The plugin's rule was re-run through `pytest_aaco.history.judge.judge_history` (and `judge.confirm`"
      " with the recorded confirmation look) with LOND replayed over each session's items:"
      f" it reproduces {agree} of {total} live"
      " outcomes. Rules that compare with one saved run are evaluated against each history run in turn, so their"
      f" A/A session counts are sessions x {len(study.history)} saved runs (not independent). The short-history"
      " rule is a first look only: the confirmation data exist only where the live plugin asked for them.")
    w("")
    rows = []
    for rule, label in RULES:
        a = offline["aa"].get(rule)
        b = offline["ab"].get(rule)
        if not a or not a["items"]:
            continue
        rows.append([label, rate(a["fa_items"], a["items"]), rate(a["fa_sessions"], a["sessions"])]
                    + [rate(*b["det"][k]) if b["det"][k][1] else "-" for k in range(len(study.sizes))])
    w(table(["rule", "A/A false alarm per item", "A/A per session"] + [f"detect {s:.0%}" for s in study.sizes],
            rows))
    w("")
    # noise
    w("## Noise model fitted to the unchanged runs")
    w("")
    w(f"From {len(study.history)} history + {len(study.aa)} A/A sessions (ln units ~ fractions). Between-run sd ="
      " sd of run means; within-run sd = sd of round log-means inside a run; iteration sd and lag-1"
      " autocorrelation inside rounds. Model: run offset sd = sqrt(between² - within²/K); round offset sd = what"
      " the within-run sd has beyond the AR(1) mean of the iterations.")
    w("")
    rows = []
    for model, v in fit["per_model"].items():
        f, nz = v["figures"], v["noise"]
        rows.append([model, f"{f['ms']:.2f}", f["n_iter"], pct(f["between_sd"], 2),
                     " / ".join(pct(x, 1) for x in f["between_sd_items"]), pct(f["within_sd"], 2),
                     pct(f["iter_sd"], 1), f"{f['rho']:.2f}", pct(nz.sd_run, 2), pct(nz.sd_round, 2),
                     pct(f["slow_share"], 0), f"+{f['run_dev_p90'] * 100:.0f}% / +{f['run_dev_max'] * 100:.0f}%"])
    w(table(["model", "ms", "iter/round", "between-run sd", "per copy", "within-run sd (rounds)", "iteration sd",
             "lag-1", "run offset sd", "round offset sd", "runs > 5% above the median run",
             "run above median: p90 / max"], rows))
    w("")
    w(f"Offset shared by all items of a session: sd {pct(fit['session_sd'], 2)}.")
    if fit.get("offset"):
        o = fit["offset"]
        w("")
        w(f"Gate sessions vs history sessions (save runs): {o['gate_minus_history'] * 100:+.2f}% on average"
          f" (Welch p={o['p_two_sided']:.2g}, {o['hist_sessions']} vs {o['gate_sessions']} sessions).")
    ep = fit.get("episodes") or {}
    if ep.get("lags"):
        secs = cost_item_s(study)
        w("")
        w(f"Slow phases: {pct(ep['base'], 0)} of unchanged runs are more than 10% above their item's median run"
          " (share per session: " + ", ".join(f"{x:.0%}" for x in ep["per_session"]) + "); the chance that the"
          " item k positions later (about k x " + f"{secs:.0f} s later) is slow too, given this one is: "
          + ", ".join(f"k={k}: {v:.0%}" for k, v in ep["lags"].items()) + ".")
    c = fit["confirm"]
    if c.get("ratio") is not None:
        w("")
        w(f"Live A/A: the confirmation look confirmed {c['confirmed']} of {c['first']} first-look regressions"
          f" ({c['ratio']:.0%}). In the simulation the confirmation look keeps the first look's run offset with"
          f" probability {c.get('persistence', 1.0):.2f}, the grid value whose simulated share comes closest"
          " (grid: " + ", ".join(f"{g[0]:.2f} -> {g[1]:.0%}" for g in c.get("grid", [])) + ").")
    w("")
    # simulation
    if sim:
        w("## Simulation")
        w("")
        cc = sim.get("cross_check") or {}
        w(f"{sim['sessions']} simulated sessions per scenario; each session has {len(study.items)} items judged in"
          " order (LOND), a history, a current run and a confirmation run; for detection one item per session"
          " (rotating) is slower by the target, the rest unchanged. The vectorised rules were checked against"
          f" `pytest_aaco.verdict.stats` (max |Δp| Welch {cc.get('welch_p', float('nan')):.1e}, prediction interval"
          f" {cc.get('pi_p', float('nan')):.1e}; LOND levels {cc.get('lond_level', float('nan')):.1e}).")
        w("")
        for key, res in sim.items():
            if not isinstance(res, dict) or "rules" not in res:
                continue
            w(f"### {res['label']}")
            w("")
            if key == "fitted":
                w(f"Session-shared offset sd {pct(res['session_sd'], 2)}, confirmation shares"
                  f" {res['confirm_corr']:.2f} of the run offset.")
                w("")
            if key == "empirical":
                w("Each simulated run's offset is drawn from the observed run-mean deviations of its model (all"
                  f" copies); the confirmation look keeps the first look's offset with probability"
                  f" {res['confirm_corr']:.2f}. This is the scenario the headline's simulated figures come from.")
                w("")
            rows = []
            names = dict(RULES)
            # the simulated "aaco" rule is the earlier one: unmoderated variance, no contention guard
            # (the moderated variance is proposal A; the simulated noise has no contention)
            names.update({"aaco": "pytest-aaco earlier rule: 5-run history, prediction interval (unmoderated),"
                                  " LOND, confirmation",
                          "aaco_h1": "pytest-aaco rule, 1-run history (Welch on rounds + 2% run term), LOND,"
                                     " confirmation"})
            names.update({"aaco_h10": "pytest-aaco rule with a 10-run history",
                          "aaco_h20": "pytest-aaco rule with a 20-run history",
                          "aaco_first_look_h10": "  10-run history, first look only",
                          "aaco_first_look_h20": "  20-run history, first look only",
                          "mod": "proposal A: variance moderated across items, 5-run history, confirmation",
                          "mod_h10": "proposal A with a 10-run history",
                          "mod_h20": "proposal A with a 20-run history",
                          "mod_2runs": "proposal B: A + mean of 2 runs with independent offsets (no confirmation),"
                                       " 5-run history",
                          "mod_2runs_h10": "proposal B with a 10-run history",
                          "mod_2runs_h20": "proposal B with a 20-run history",
                          "mod_3runs": "proposal B with 3 runs, 5-run history",
                          "mod_3runs_h10": "proposal B with 3 runs, 10-run history",
                          "mod_3runs_h20": "proposal B with 3 runs, 20-run history",
                          "mod_3runs_half": "proposal C: B with 3 runs, estimate >= δ/2 suffices, 5-run history",
                          "mod_3runs_half_h10": "proposal C with a 10-run history",
                          "mod_3runs_half_h20": "proposal C with a 20-run history",
                          "pi_2runs": "mean of 2 independent runs, per-item variance, 5-run history",
                          "pi_2runs_h10": "mean of 2 independent runs, per-item variance, 10-run history",
                          "pi_2runs_h20": "mean of 2 independent runs, per-item variance, 20-run history",
                          "aaco_h1": "pytest-aaco rule, 1-run history (Welch on rounds + 2% run term), LOND,"
                                     " confirmation",
                          "naive_welch_2s": "naive Welch on pooled iterations, two-sided 5% (a change either way,"
                                            " as DESIGN.md counts 'flags')"})
            for rule, e in res["rules"].items():
                if rule == "naive_welch_2s" and key in ("fitted", "empirical"):
                    continue
                rows.append([names.get(rule, rule), pct(e.get("fa_item"), 2), pct(e.get("fa_session"), 1)]
                            + [pct(e.get("det", {}).get(f"{s:.2f}"), 1) for s in study.sizes])
            w(table(["rule", "false alarm per item", f"per session ({len(study.items)} items)"]
                    + [f"detect {s:.0%}" for s in study.sizes], rows))
            w("")
            e = res["rules"].get("aaco", {})
            if e.get("outcomes"):
                orow = []
                for s in study.sizes:
                    d = e["outcomes"][f"{s:.2f}"]
                    orow.append([f"{s:.0%}"] + [pct(d[o], 1) for o in OUTCOMES]
                                + [pct(e["mde"][f"{s:.2f}"], 1)])
                d = e.get("aa_outcomes", {})
                orow.insert(0, ["0% (A/A)"] + [pct(d.get(o), 1) for o in OUTCOMES] + ["-"])
                if e.get("aa_noreg05") is not None:
                    w(f"With nothing changed, a one-sided 95% upper bound (instead of the 1 - α_i bound the plugin"
                      f" uses) would say no-regression for {pct(e['aa_noreg05'], 1)} of items.")
                    w("")
                w("Outcome distribution of the plugin's rule (as built) for the changed item:")
                w("")
                w(table(["true slowdown"] + list(OUTCOMES) + ["median MDE"], orow))
                w("")
            if key in ("fitted", "empirical") and e.get("det_by_model"):
                w("Detection by model (plugin as built):")
                w("")
                w(table(["model", "between-run sd"] + [f"{s:.0%}" for s in study.sizes],
                        [[mo, pct(fit["per_model"][mo]["figures"]["between_sd"], 2)]
                         + [pct(e["det_by_model"][mo].get(f"{s:.2f}"), 0) for s in study.sizes]
                         for mo in e["det_by_model"]]))
                w("")
    # cost
    w("## Cost per item")
    w("")
    w("Wall time of each test case from pytest's JUnit XML (setup + call + teardown: InferenceSession creation,"
      " warmup, 10 rounds, verdict, and the confirmation look when there is one), gate sessions only.")
    w("")
    rows = []
    for model, v in cost["per_model"].items():
        rows.append([model, f"{v['ms']:.1f}", v["n"], f"{v['median_s']:.1f}", f"{v['p95_s']:.1f}", f"{v['max_s']:.1f}",
                     f"{v['plain_median_s']:.1f}", v["confirmed_n"],
                     f"{v['confirmed_median_s']:.1f}" if v["confirmed_n"] else "-"])
    w(table(["model", "ms/iteration (A/A)", "items", "median s", "p95 s", "max s", "median s without confirmation",
             "items with confirmation", "median s with confirmation"], rows))
    w("")
    sw = cost["session_wall"]
    w(f"Session wall time (median): history {sw['history']:.0f} s, A/A {sw['aa']:.0f} s, A/B {sw['ab']:.0f} s;"
      f" pytest start-up and collection outside the items: {cost['session_overhead_s']:.1f} s per session.")
    if cost.get("rss"):
        w("")
        w("Peak RSS of the pytest process during the first and the last item (median over sessions): "
          + "; ".join(f"{k} sessions {a:.0f} MB -> {b:.0f} MB" for k, (a, b) in cost["rss"].items()) + ".")
    w("")
    # pytest-benchmark check
    pb = m.get("pbcheck") or {}
    w("## pytest-benchmark rule: emulation check")
    w("")
    if pb.get("skipped"):
        w(f"Skipped: {pb['skipped']}.")
    elif pb.get("rows"):
        w("pytest-benchmark 5.3.1 (installed with `pip install --target` into a separate folder, put on PYTHONPATH of"
          " this check only) ran `benchmark(session.run, None, feeds)` twice: `--benchmark-save=base`, then, with"
          " some tests pointing at a B model, `--benchmark-compare=0001 --benchmark-compare-fail=mean:5%`. Its saved"
          " JSON stats were fed to the emulation (`current.mean / saved.mean * 100 - 100 > 5`) and compared with the"
          " tests it listed under 'Performance has regressed'.")
        w("")
        w(table(["test", "saved mean ms", "current mean ms", "change", "rounds x iterations", "mean of raw data ms",
                 "pytest-benchmark failed it", "emulation fails it"],
                [[r["name"], f"{r['saved_mean_ms']:.3f}", f"{r['current_mean_ms']:.3f}", f"{r['change_pct']:+.1f}%",
                  f"{r['rounds']} x {r['iterations']}",
                  f"{r['mean_of_data_ms']:.3f}" if r["mean_of_data_ms"] is not None else "-",
                  r["pytest_benchmark_fail"], r["emulated_fail"]] for r in pb["rows"]]))
        w("")
        w(f"Emulation agrees with pytest-benchmark on every test: **{pb.get('agree')}**. With one iteration per"
          " round its `mean` is the plain mean of the iterations, which is what the emulation on the plugin's"
          " recorded iterations uses.")
    w("")
    notes = getattr(args, "notes", None)
    if notes and Path(notes).is_file():
        w(Path(notes).read_text().rstrip())
        w("")
    return "\n".join(out) + "\n"
