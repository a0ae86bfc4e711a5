"""The mode folder's result files (spec 60 §3): ``best_config_topn.csv`` and ``pareto.csv``
(the sweep-row columns, private columns dropped, ``tokens/s/gpu_cluster`` last) and the
experiment record ``exp_config.yaml`` (the resolved experiment in the reference's key order,
enough to run the sweep again)."""

from __future__ import annotations

from ..serving.sweep import cp_sizes

CLUSTER_COLUMN = "tokens/s/gpu_cluster"
QUANT_KEYS = ("gemm", "moe", "kvcache", "fmha", "comm")
#: Candidate GPU counts of a dense / MoE role (spec 50 §9.2).
DENSE_NUM_GPU = (1, 2, 4, 8)
MOE_NUM_GPU = (1, 2, 4, 8, 16)
#: Allowed disagg replica sizes: 1, 2, 4, then multiples of 8 up to 128 (spec 60 §3.2).
NUM_GPU_PER_REPLICA = [1, 2, 4] + list(range(8, 129, 8))


def csv_columns(rows: list[dict]) -> list[str]:
    """The CSV columns of a mode's rows: the row keys without private (``_``) columns, then
    ``tokens/s/gpu_cluster`` (spec 60 §3.1)."""
    if not rows:
        return []
    cols = [c for c in rows[0] if not c.startswith("_") and c != CLUSTER_COLUMN]
    return cols + [CLUSTER_COLUMN]


def cluster_throughput(row: dict, total_gpus: int) -> float:
    """``tokens/s/gpu × (total // n) × n / total`` (spec 60 §3.1), binary64 left to right."""
    n = row["num_total_gpus"]
    return row["tokens/s/gpu"] * (total_gpus // n) * n / total_gpus


def _candidates(prefix: str, is_moe: bool, family: str, backend: str, total_gpus: int,
                runs_context: bool) -> dict:
    widths = list(MOE_NUM_GPU) if is_moe else list(DENSE_NUM_GPU)
    many = list(MOE_NUM_GPU) if is_moe else [1]
    return {
        f"{prefix}_num_gpu_candidates": [g for g in widths if g <= total_gpus],
        f"{prefix}_tp_candidates": list(widths),
        f"{prefix}_pp_candidates": [1],
        f"{prefix}_dp_candidates": list(many),
        f"{prefix}_moe_tp_candidates": list(many),
        f"{prefix}_moe_ep_candidates": list(many),
        f"{prefix}_cp_candidates": list(cp_sizes(family, backend, runs_context)),
    }


def _empty_role(prefix: str, with_chunked: bool) -> dict:
    out = {f"{prefix}model_path": "", f"{prefix}system_name": "",
           f"{prefix}backend_name": "trtllm", f"{prefix}backend_version": None,
           f"{prefix}enable_wideep": False}
    if with_chunked:
        out[f"{prefix}enable_chunked_prefill"] = False
    out[f"{prefix}enable_eplb"] = False
    return out


def _quant(prefix: str, row: dict | None, column_prefix: str) -> dict:
    return {f"{prefix}{q}_quant_mode": (row.get(f"{column_prefix}{q}") if row else None)
            for q in QUANT_KEYS}


def _null_candidates(prefix: str) -> dict:
    return {f"{prefix}_{k}_candidates": None
            for k in ("num_gpu", "tp", "pp", "dp", "moe_tp", "moe_ep", "cp")}


def exp_config(mode: str, *, model: str, system: str, backend: str, version: str,
               family: str, moe_layouts: bool, isl: int, osl: int, prefix: int, ttft: float, tpot: float,
               request_latency: float | None, total_gpus: int, nextn: int,
               nextn_accepted: float | None, row: dict | None) -> dict:
    """The experiment record of one mode (spec 60 §3.2). ``row`` is one of the mode's rows
    (its quant columns are the sweep's resolved quant modes); ``moe_layouts``: whether the
    sweep searched MoE layouts."""
    is_moe = moe_layouts
    agg = mode == "agg"
    rec: dict = {
        "serving_mode": mode, "isl": isl, "osl": osl, "prefix": prefix, "image_height": 0,
        "image_width": 0, "num_images_per_request": 1, "enable_encoder_dp": True,
        "ttft": float(ttft), "tpot": float(tpot), "pareto_sweep": True,
        "request_latency": request_latency, "total_gpus": total_gpus,
        "database_mode": "SILICON", "transfer_policy": None, "free_gpu_memory_fraction": None,
        "max_seq_len": None, "engine_step_backend": None, "forward_model": "op_level",
    }
    if agg:
        rec.update({"model_path": model, "system_name": system, "backend_name": backend,
                    "backend_version": version, "enable_wideep": False,
                    "enable_chunked_prefill": False, "enable_eplb": False})
    else:
        rec.update(_empty_role("", True))
    rec.update({"nextn": nextn, "nextn_accepted": nextn_accepted, "moe_backend": None,
                "attention_backend": None, "wideep_num_slots": None})
    rec.update(_quant("", row if agg else None, ""))
    rec.update(_candidates("agg", is_moe, family, backend, total_gpus, True) if agg
               else _null_candidates("agg"))
    for role, column_prefix, runs_context in (("prefill", "(p)", True), ("decode", "(d)", False)):
        p = f"{role}_"
        if agg:
            rec.update(_empty_role(p, role == "prefill"))
            rec.update(_quant(p, None, column_prefix))
            rec.update(_null_candidates(role))
        else:
            rec.update({f"{p}model_path": model, f"{p}system_name": system,
                        f"{p}backend_name": backend, f"{p}backend_version": version,
                        f"{p}enable_wideep": False})
            if role == "prefill":
                rec[f"{p}enable_chunked_prefill"] = False
            rec[f"{p}enable_eplb"] = False
            rec.update(_quant(p, row, column_prefix))
            rec.update(_candidates(role, is_moe, family, backend, total_gpus, runs_context))
    rec.update({
        "num_gpu_per_replica": None if agg else list(NUM_GPU_PER_REPLICA),
        "max_gpu_per_replica": None if agg else min(total_gpus, 128),
        "max_prefill_workers": None if agg else 32,
        "max_decode_workers": None if agg else 32,
        "prefill_max_batch_size": 1, "decode_max_batch_size": 512,
        "prefill_latency_correction": 1.1, "decode_latency_correction": 1.08,
        "rate_match_prefill_degradation": 0.9, "rate_match_decode_degradation": 0.92,
        "rate_match_encoder_degradation": 0.9, "autoscale_ttft_correction_factor": 1.8,
        "enable_epd": False, "encoder_tp_candidates": None, "encoder_batch_candidates": None,
        "max_encoder_workers": None, "encoder_latency_correction": 1.0,
        "encoder_system_name": None, "afd_total_gpus": None, "afd_combined_with_pd": True,
        "afd_comm_overhead_factor": 1.0, "afd_boundary_on_attn": True,
        "afd_total_batch_size": None, "afd_max_a_batch_size": 1024, "afd_n_a_nodes": None,
        "afd_n_f_nodes": None, "afd_tp_a": None, "afd_a_batch_size": None,
        "afd_tp_a_candidates": None, "afd_microbatch_candidates": None,
        "afd_pipeline_model_candidates": None, "afd_f_moe_ep_size_candidates": None,
        "afd_max_af_ratio": 4.0, "afd_max_candidates": 10000,
        "afd_candidate_overflow": "error", "afd_prefill_batch_size_list": None,
        "afd_prefill_max_candidates": 256, "afd_prefill_candidate_overflow": "error",
        "afd_max_prefill_gpus": None, "afd_max_prefill_workers": None,
        "afd_prefill_degradation": None, "afd_decode_degradation": None,
        "afd_ttft_correction_factor": None, "afd_decode_latency_correction": 1.0,
    })
    return rec
