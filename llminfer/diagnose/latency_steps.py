"""Chapter 7's latency-side steps: is the GPU's own work too slow, or slowed by other requests?

Two of the seven steps, each a function of ``Observations`` returning one ``Finding``:
prefill — the prompts' own prefill as most of TTFT (5), and decode — why TPOT misses: too slow
even at low load, interference from other requests' prefills (stalls in the token streams, or a
fit of TPOT against batch and overlapping prefill work), or overload (6). Their thresholds live
in ``llminfer.diagnose.procedure``; ``llminfer.diagnose`` runs them in order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from llminfer.cost.latency import estimate_latency
from llminfer.diagnose.findings import Finding
from llminfer.diagnose.observations import Observations, finite_percentile
from llminfer.diagnose.procedure import (
    FLOOR_MULTIPLE,
    LOW_LOAD_BATCH_SHARE,
    MIN_REQUESTS,
    PREFILL_CONCENTRATION,
    STAGE_SHARE,
    STALL_SHARE_OF_MISS,
    STALLS_IN_PREFILL_SHARE,
)
from llminfer.diagnose.signals import rank_correlation
from llminfer.language import N_, _
from llminfer.logs.metrics import STALL_FACTOR


def prefill_step(obs: Observations) -> Finding:
    """Step 5, prefill: is the prompts' own prefill (s) most of the slow requests'
    TTFT, so that even with no queue the GPU misses the target (cause ``too_slow``)?

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    if obs.n_ok < MIN_REQUESTS:
        return obs.too_few("prefill", MIN_REQUESTS)
    target = obs.slo["ttft_s"]
    common = {"samples": obs.n_ok, "min_requests": MIN_REQUESTS}
    evidence: dict[str, Any] = {
        "ttft_p90_s": obs.ttft_p90,
        "input_tokens_p90": obs.percentile(obs.prompts, 90),
    }
    if obs.deployment_known:
        estimate = estimate_latency(
            obs.model,
            obs.gpu,
            max(1, int(min(evidence["input_tokens_p90"], obs.model.max_context - 2))),
            2,
            weight_dtype=obs.weight_dtype,
            kv_dtype=obs.kv_dtype,
            n_gpus=obs.n_gpus,
        )
        evidence["estimated_prefill_at_p90_prompt_s"] = estimate.ttft_s
    if obs.lockstep is not None:
        evidence["single_prefill_s"] = obs.lockstep["single_prefill_s"]
        return Finding(
            "prefill",
            "ok",
            evidence,
            _(
                "one prefill alone takes {single:.3g} s, within the target: "
                "TTFT is the prefill of requests sent together (see queueing)"
            ).format(single=evidence["single_prefill_s"]),
            **common,
        )
    if obs.own is None:
        if "ttft" in obs.missed:
            return Finding(
                "prefill",
                "cant_tell",
                evidence,
                _(
                    "TTFT misses its target; without scheduled_ts (and with too few requests "
                    "arriving to an empty queue) the prompts' own prefill cannot be measured"
                ),
                missing=("scheduled_ts",),
                **common,
            )
        return Finding("prefill", "ok", evidence, _("TTFT meets its target"), **common)
    own = obs.own
    evidence["stage_p90_s"] = finite_percentile(own, 90)
    evidence["share_of_slow_requests"] = obs.slow_share(own)
    own_slow = (obs.ttft > target) & (own > obs.ttft / 2)
    evidence["slow_own_prompt_p50_tokens"] = finite_percentile(obs.prompts[own_slow], 50)
    evidence["rho_prefill_prompt"] = rank_correlation(obs.prompts, own)
    how = _("measured") if obs.queue is not None else _("estimated from requests that did not wait")
    if "ttft" not in obs.missed:
        return Finding(
            "prefill",
            "ok",
            evidence,
            _("TTFT meets its target; own prefill p90 {p90:.3g} s").format(
                p90=evidence["stage_p90_s"]
            ),
            **common,
        )
    if evidence["share_of_slow_requests"] > STAGE_SHARE:
        return Finding(
            "prefill",
            "problem",
            evidence,
            _(
                "TTFT p90 {p90:.3g} s misses its {target:g} s target and the prompts' "
                "own prefill ({how}) is most of the TTFT of {share:.0%} of the slow requests, "
                "whose prompts have {tokens:,.0f} tokens (median): even with no "
                "queue this GPU cannot prefill them within the target"
            ).format(
                p90=obs.ttft_p90,
                target=target,
                how=how,
                share=evidence["share_of_slow_requests"],
                tokens=evidence["slow_own_prompt_p50_tokens"],
            ),
            cause="too_slow",
            suggestions=obs.suggestions("too_slow", "ttft"),
            **common,
        )
    return Finding(
        "prefill", "ok", evidence, _("prefill is not what makes TTFT miss its target"), **common
    )


def _fit_tpot(tpot: np.ndarray, decoding: np.ndarray, overlap: np.ndarray) -> tuple[float, ...]:
    """TPOT ≈ a + b·decoding + c·overlap by least squares with b, c ≥ 0 (a coefficient that
    comes out negative is dropped and the rest refitted)."""
    keep = np.isfinite(tpot) & np.isfinite(decoding) & np.isfinite(overlap)
    y = tpot[keep]
    columns = {"b": decoding[keep], "c": overlap[keep]}
    active = [k for k, v in columns.items() if np.ptp(v) > 0]
    while True:
        x = np.column_stack([np.ones(y.size)] + [columns[k] for k in active])
        coef = np.linalg.lstsq(x, y, rcond=None)[0]
        fitted = dict(zip(active, coef[1:], strict=True))
        negative = [k for k in active if fitted[k] < 0]
        if not negative:
            return coef[0], fitted.get("b", 0.0), fitted.get("c", 0.0)
        active = [k for k in active if k not in negative]


def decode_step(obs: Observations) -> Finding:
    """Step 6, decode: why TPOT (s) misses its target. ``too_slow`` when it misses at
    low load (or for one request alone); else ``interference`` when other requests' prefills
    stall the slow requests' decode (measured from ``token_ts`` stalls when present, else
    fitted: TPOT ≈ a + b·decoding together + c·overlapping prefill tokens/s), ``overload``
    otherwise.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    tpot_ok = np.isfinite(obs.tpot)
    if tpot_ok.sum() < MIN_REQUESTS:
        return obs.too_few("decode", MIN_REQUESTS, N_("successful requests with a TPOT"))
    common = {"samples": int(tpot_ok.sum()), "min_requests": MIN_REQUESTS}
    target = obs.slo["tpot_s"]
    d, p, tpot = obs.decoding, obs.overlap, obs.tpot
    # Low load: the requests that decoded in the smallest batches and saw few prefills.
    quiet = (d <= max(obs.percentile(d, 10), 1.0) * 1.01) & (p <= obs.percentile(p, 50))
    if quiet.sum() < 5:
        quiet = d <= obs.percentile(d, 10) * 1.01
    evidence: dict[str, Any] = {
        "tpot_p90_s": obs.tpot_p90,
        "tpot_target_s": target,
        "decoding_together_p50": obs.percentile(d, 50),
        "low_load_tpot_s": finite_percentile(tpot[quiet], 50),
        "low_load_decoding": finite_percentile(d[quiet], 50),
    }
    if obs.stalls is not None:
        evidence.update(_stall_evidence(obs))
    if obs.deployment_known:
        context = int(obs.percentile(obs.prompts, 50) + 1)
        outputs = max(2, int(finite_percentile(obs.good["output_tokens"].to_numpy(float), 50)))
        batch = max(1, round(evidence["low_load_decoding"]))
        floor = estimate_latency(
            obs.model,
            obs.gpu,
            min(context, obs.model.max_context - outputs),
            outputs,
            batch=batch,
            weight_dtype=obs.weight_dtype,
            kv_dtype=obs.kv_dtype,
            n_gpus=obs.n_gpus,
        ).ideal.tpot_s
        evidence["tpot_floor_s"] = floor
        evidence["low_load_tpot_over_floor"] = evidence["low_load_tpot_s"] / floor
    if "tpot" not in obs.missed:
        return Finding(
            "decode",
            "ok",
            evidence,
            _("TPOT p90 {p90:.3g} ms meets its {target:g} ms target").format(
                p90=obs.tpot_p90 * 1e3, target=target * 1e3
            ),
            **common,
        )
    a, b, c = _fit_tpot(tpot, d, p)
    batch_share = b * evidence["low_load_decoding"] / max(evidence["low_load_tpot_s"], 1e-12)
    evidence["low_load_batch_share"] = batch_share
    low_load_seen = batch_share <= LOW_LOAD_BATCH_SHARE
    alone_misses = evidence["low_load_tpot_s"] > target
    if alone_misses and not low_load_seen:
        # No request ran at low load: estimate one request alone instead.
        if obs.deployment_known:
            alone = estimate_latency(
                obs.model,
                obs.gpu,
                min(context, obs.model.max_context - outputs),
                outputs,
                batch=1,
                weight_dtype=obs.weight_dtype,
                kv_dtype=obs.kv_dtype,
                n_gpus=obs.n_gpus,
            ).tpot_s
            how = _("the step-time estimate for one request alone")
        else:
            alone = max(a + b, 0.0)
            how = _("TPOT against requests decoding together, extrapolated to one")
        evidence["alone_tpot_s"] = alone
        alone_misses = alone > target
    if alone_misses:
        vs_floor = ""
        if "low_load_tpot_over_floor" in evidence:
            ratio = evidence["low_load_tpot_over_floor"]
            # TRANSLATORS: {why} is "the hardware limit" or "the engine is far from the floor …".
            vs_floor = _("; that is {ratio:.1f}× the bandwidth floor — {why}").format(
                ratio=ratio,
                why=_("the hardware limit")
                if ratio <= FLOOR_MULTIPLE
                else _("the engine is far from the floor (kernels, CUDA graphs, precision)"),
            )
        seen = (
            _("{tpot:.3g} ms with {batch:.1f} requests decoding together{vs_floor}").format(
                tpot=evidence["low_load_tpot_s"] * 1e3,
                batch=evidence["low_load_decoding"],
                vs_floor=vs_floor,
            )
            if low_load_seen
            else _("no request ran at low load, and {how} is {tpot:.3g} ms").format(
                how=how, tpot=evidence["alone_tpot_s"] * 1e3
            )
        )
        return Finding(
            "decode",
            "problem",
            evidence,
            _("TPOT misses its {target:g} ms target even at low load: {seen}").format(
                target=target * 1e3, seen=seen
            ),
            cause="too_slow",
            suggestions=obs.suggestions("too_slow", "tpot"),
            **common,
        )
    if obs.stalls is not None:
        return _decode_from_stalls(obs, evidence, common)
    slow = tpot > target
    # What sets the slow requests apart from the median request: a bigger batch, or more
    # prefill work during their decode? Load raises both for everyone; interference is prefill
    # work concentrated on the slow requests (they overlapped long prompts, others did not).
    from_batch = b * max(finite_percentile(d[slow], 50) - obs.percentile(d, 50), 0.0)
    from_prefill = c * max(finite_percentile(p[slow], 50) - obs.percentile(p, 50), 0.0)
    concentrated = finite_percentile(p[slow], 50) >= PREFILL_CONCENTRATION * max(
        obs.percentile(p, 50), 1.0
    )
    evidence.update(
        {
            "slow_decoding_together_p50": finite_percentile(d[slow], 50),
            "slow_prefill_overlap_tokens_per_s": finite_percentile(p[slow], 50),
            "tpot_from_batch_s": from_batch,
            "tpot_from_overlapping_prefills_s": from_prefill,
        }
    )
    if from_prefill > from_batch and concentrated:
        return Finding(
            "decode",
            "problem",
            evidence,
            _(
                "TPOT p90 {p90:.3g} ms misses its {target:g} ms target "
                "because other requests' prefills run during the slow requests' decode: "
                "{slow:,.0f} prompt tokens/s against {median:,.0f} for the median request, "
                "adding ≈ {prefill:.3g} ms per token (a bigger batch ≈ {batch:.3g} ms) — long "
                "prefills stall the decode steps they share"
            ).format(
                p90=obs.tpot_p90 * 1e3,
                target=target * 1e3,
                slow=evidence["slow_prefill_overlap_tokens_per_s"],
                median=obs.percentile(p, 50),
                prefill=from_prefill * 1e3,
                batch=from_batch * 1e3,
            ),
            cause="interference",
            suggestions=obs.suggestions("interference"),
            **common,
        )
    alone_note = (
        _("; one request alone would take ≈ {tpot:.3g} ms").format(
            tpot=evidence["alone_tpot_s"] * 1e3
        )
        if "alone_tpot_s" in evidence
        else ""
    )
    reason = _(
        "the slow requests decoded {slow:.0f} together (the quietest {quiet:.1f}{alone_note}) "
        "and every decode shares its steps with the prompts that keep arriving "
        "({prompts:,.0f} prompt tokens/s at the median)"
    ).format(
        slow=evidence["slow_decoding_together_p50"],
        quiet=evidence["low_load_decoding"],
        alone_note=alone_note,
        prompts=obs.percentile(p, 50),
    )
    return Finding(
        "decode",
        "problem",
        evidence,
        _(
            "TPOT p90 {p90:.3g} ms misses its {target:g} ms target under load but not at low "
            "load: {reason} — more load than one replica serves within the TPOT target"
        ).format(p90=obs.tpot_p90 * 1e3, target=target * 1e3, reason=reason),
        cause="overload",
        suggestions=obs.suggestions("overload", "tpot"),
        **common,
    )


def _stall_evidence(obs: Observations) -> dict[str, Any]:
    """ITL and stall figures of the successful requests (seconds), from ``token_ts``."""
    st = obs.stalls
    n = int(st["n_stalls"].sum())
    return {
        "itl_s_p50": st.attrs["median_gap_s"],
        "itl_s_p99": st.attrs["p99_gap_s"],
        "stalls": n,
        "stalls_in_prefill_share": float(st["stalls_in_prefill"].sum() / n) if n else 0.0,
        "stalled_requests_share": float((st["n_stalls"] > 0).mean()),
        "tpot_p90_without_stalls_s": finite_percentile(
            st["tpot_without_stalls_s"].to_numpy(float), 90
        ),
    }


def _decode_from_stalls(obs: Observations, evidence: dict, common: dict) -> Finding:
    """TPOT misses under load: interference when the stalls in the token streams — gaps during
    other requests' prefills — are what push TPOT over its target, overload otherwise."""
    target = obs.slo["tpot_s"]
    smooth = evidence["tpot_p90_without_stalls_s"]
    share = evidence["stalls_in_prefill_share"]
    stalls = _(
        "{stalls:,} stalls (gaps > {factor:g}× the median gap of {median:.3g} ms; ITL p99 "
        "{p99:.3g} ms), {share:.0%} of them while another request's prefill ran"
    ).format(
        stalls=evidence["stalls"],
        factor=STALL_FACTOR,
        median=evidence["itl_s_p50"] * 1e3,
        p99=evidence["itl_s_p99"] * 1e3,
        share=share,
    )
    of_miss = (obs.tpot_p90 - smooth) / (obs.tpot_p90 - target)
    evidence["stall_share_of_miss"] = of_miss
    if of_miss >= STALL_SHARE_OF_MISS and share >= STALLS_IN_PREFILL_SHARE:
        return Finding(
            "decode",
            "problem",
            evidence,
            # TRANSLATORS: {stalls} says how many stalls and how long; {share} is "the stalls
            # alone make the whole miss" or "40% of the miss is stalls".
            _(
                "TPOT p90 {p90:.3g} ms misses its {target:g} ms target because of {stalls}; "
                "with each stall a median gap TPOT p90 would be {smooth:.3g} ms ({share}) — "
                "long prefills stall the decode steps they share"
            ).format(
                p90=obs.tpot_p90 * 1e3,
                target=target * 1e3,
                stalls=stalls,
                smooth=smooth * 1e3,
                share=_("the stalls alone make the whole miss")
                if of_miss >= 1
                else _("{share:.0%} of the miss is stalls").format(share=of_miss),
            ),
            cause="interference",
            suggestions=obs.suggestions("interference"),
            **common,
        )
    return Finding(
        "decode",
        "problem",
        evidence,
        _(
            "TPOT p90 {p90:.3g} ms misses its {target:g} ms target under load "
            "but not at low load, and mostly not because of stalls: with each of the {stalls} a "
            "median gap TPOT p90 would still be {smooth:.3g} ms; requests decode "
            "{together:.0f} together at the median — more load than one "
            "replica serves within the TPOT target"
        ).format(
            p90=obs.tpot_p90 * 1e3,
            target=target * 1e3,
            stalls=stalls,
            smooth=smooth * 1e3,
            together=evidence["decoding_together_p50"],
        ),
        cause="overload",
        suggestions=obs.suggestions("overload", "tpot"),
        **common,
    )
