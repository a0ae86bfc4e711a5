"""Parity of the ``--save-dir`` result tree against ``aic-deploy-goldens/1`` files (spec 60
§15, §16).

A case's ``args`` are the reference's ``cli default`` arguments; they are mapped onto
:func:`aic.serving.sweep.sweep` and :func:`aic.deploy.save_sweep` (without replays), the tree
is written to a temporary folder and compared with the golden: the file sets (root, mode and
pick folders; the plot by name stem, out-of-scope files of the golden not required, aic's
``replay.json`` allowed), the CSVs (columns, row count, cells: strings exactly, numbers to the
tolerance and of the same int/float kind), the parsed ``exp_config.yaml`` and every in-scope
pick file (YAML as parsed data, scripts line by line).

Where aic deliberately differs (spec 60 §16) the golden is corrected before the comparison:
attention-DP MoE workers on SGLang / TRT-LLM get the row's ``tp·pp·dp`` GPUs (manifest GPU
limit, no multi-node settings or ComputeDomain when that fits a node, the node scripts merged
onto one node with the corrected counts), and without ``--namespace`` the benchmark Job has no
namespace and points at the frontend by its short name.
"""

from __future__ import annotations

import csv
import math
import os
import re
import tempfile

import yaml

from .report import Check
from .serving import diff_values

DEPLOY_FORMAT = "aic-deploy-goldens/1"
FAMILY = "deploy"
#: aic files a pick folder may hold beyond the golden's in-scope files.
AIC_EXTRA_PICK_FILES = ("replay.json",)
#: Files of the golden's pick folders outside spec 60's scope (§2, §13): not required.
OUT_OF_SCOPE = ("generator_config.yaml", "sflow.yaml", "per_ops_source.json",
                "moe_comm_fallbacks.json")
#: GPUs per node of the golden systems (h100 / h200 / b200 files).
GPUS_PER_NODE = 8

_VALUE_ARGS = {
    "--model-path": "model", "--system": "system", "--backend": "backend",
    "--backend-version": "backend_version", "--total-gpus": "total_gpus", "--isl": "isl",
    "--osl": "osl", "--ttft": "ttft", "--tpot": "tpot", "--prefix": "prefix",
    "--top-n": "top_n", "--nextn": "nextn", "--nextn-accepted": "nextn_accepted",
    "--request-latency": "request_latency", "--deployment-target": "target",
    "--dynamo-version": "dynamo_version", "--generator-dynamo-version": "dynamo_version",
    "--namespace": "namespace", "--model-cache": "model_cache", "--transport": "transport",
    "--image-pull-secret": "image_pull_secret",
}
_INT_ARGS = ("total_gpus", "isl", "osl", "prefix", "top_n", "nextn")
_FLOAT_ARGS = ("ttft", "tpot", "nextn_accepted", "request_latency")


def deploy_cases(doc: dict, stem: str) -> list[dict]:
    """The cases of a deploy golden file, tagged for the runner."""
    return [{**case, "_file": stem, "family": FAMILY, "_deploy": True} for case in doc["cases"]]


def parse_args(args: list[str]) -> dict:
    """The reference's ``cli default`` arguments as aic's sweep and generator inputs; an
    argument aic does not map is a ``ValueError`` (the case fails rather than running
    something else)."""
    out: dict = {"sets": []}
    i = 0
    while i < len(args):
        flag = args[i]
        if flag == "--generator-set":
            out["sets"].append(args[i + 1])
            i += 2
            continue
        if flag not in _VALUE_ARGS or i + 1 >= len(args):
            raise ValueError(f"golden argument {flag!r} has no aic mapping")
        key, text = _VALUE_ARGS[flag], args[i + 1]
        out[key] = int(text) if key in _INT_ARGS else float(text) if key in _FLOAT_ARGS else text
        i += 2
    return out


def _sort_key(row: dict):
    return (-row["tokens/s/gpu_cluster"], -row["tokens/s/user"])


def follow_tied_picks(out: dict, case: dict, total_gpus: int) -> list[str]:
    """Where the reference picked another row of the same tie (same group, same
    ``tokens/s/gpu_cluster``; spec 50 §9.4-§9.5: the reference's unstable sorts decide among
    tied rows, and any tied row is a correct pick), use **our own** candidate row equal to the
    reference's pick, so the files of the same row are compared. A golden pick that is not one
    of our candidates, or not tied with our pick, is left alone (and fails). Returns notes."""
    from ..deploy.results import cluster_throughput
    from ..serving.sweep import _row_key

    notes = []
    for mode, ref in case.get("modes", {}).items():
        ours = out["best_configs"].get(mode) or []
        group = "(d)parallel" if mode == "disagg" else "parallel"
        columns = ref["best_config_topn"]["columns"]
        ref_rows = [r if isinstance(r, dict) else dict(zip(columns, r))
                    for r in ref["best_config_topn"]["rows"]]
        if [(r[group], r["tokens/s/gpu_cluster"]) for r in ours] and sorted(
                (r[group], r["tokens/s/gpu_cluster"]) for r in ours) != sorted(
                (r[group], r["tokens/s/gpu_cluster"]) for r in ref_rows):
            continue
        by_key = {}
        for cand in out["candidates"].get(mode, []):
            by_key.setdefault(_row_key({k: v for k, v in cand.items()
                                        if not k.startswith("_")}), cand)
        changed = False
        picks = list(ours)
        for i, mine in enumerate(picks):
            same = [r for r in ref_rows if r[group] == mine[group]
                    and r["tokens/s/gpu_cluster"] == mine["tokens/s/gpu_cluster"]]
            if not same:
                continue
            wanted = {k: v for k, v in same[0].items() if k != "tokens/s/gpu_cluster"}
            if all(mine.get(k) == v for k, v in wanted.items()):
                continue
            cand = by_key.get(_row_key({k: ("" if v is None else v) for k, v in wanted.items()}))
            cand = cand or by_key.get(_row_key(wanted))
            if cand is None:
                continue
            row = dict(cand)
            row["tokens/s/gpu_cluster"] = round(cluster_throughput(row, total_gpus), 3)
            if row["tokens/s/gpu_cluster"] != mine["tokens/s/gpu_cluster"]:
                continue
            picks[i] = row
            changed = True
            notes.append(f"{mode}: tied pick {mine[group]} follows the reference's row")
        if changed:
            out["best_configs"][mode] = sorted(picks, key=_sort_key)
        # Pareto fronts: exact (x, y) duplicates collapse to the first in sort order (spec 50
        # §9.5 step 2), so a tie can leave another of the duplicate rows on the front.
        front = list(out["pareto_fronts"].get(mode) or [])
        pcols = ref["pareto"]["columns"]
        ref_front = [r if isinstance(r, dict) else dict(zip(pcols, r))
                     for r in ref["pareto"]["rows"]]
        if len(front) == len(ref_front):
            for i, (mine, theirs) in enumerate(zip(front, ref_front)):
                xy = ("tokens/s/user", "tokens/s/gpu_cluster")
                if any(mine[k] != theirs[k] for k in xy):
                    continue
                wanted = {k: v for k, v in theirs.items() if k != "tokens/s/gpu_cluster"}
                if all(mine.get(k) == v for k, v in wanted.items()):
                    continue
                cand = by_key.get(_row_key(wanted))
                if cand is None:
                    continue
                row = dict(cand)
                row["tokens/s/gpu_cluster"] = round(cluster_throughput(row, total_gpus), 3)
                if row["tokens/s/gpu_cluster"] == mine["tokens/s/gpu_cluster"]:
                    front[i] = row
                    notes.append(f"{mode}: tied Pareto row {i} follows the reference's row")
            out["pareto_fronts"][mode] = front
    return notes


def run_tree(params: dict, folder: str, systems_path=None, case: dict | None = None) -> str:
    """Runs the sweep of ``params`` and writes its tree (no replays) under ``folder``; with
    ``case``, tied picks follow the reference's choice (:func:`follow_tied_picks`)."""
    from ..deploy import GeneratorOptions, save_sweep
    from ..serving.sweep import sweep

    p = dict(params)
    options = GeneratorOptions.create(
        target=p.get("target"), dynamo_version=p.get("dynamo_version"),
        namespace=p.get("namespace"), model_cache=p.get("model_cache"),
        transport=p.get("transport"), image_pull_secret=p.get("image_pull_secret"),
        sets=p.get("sets"))
    kwargs = {k: p[k] for k in ("isl", "osl", "prefix", "ttft", "tpot", "request_latency",
                                 "nextn", "nextn_accepted", "top_n", "backend_version")
              if k in p}
    out = sweep(p["model"], p["total_gpus"], p["system"], p.get("backend", "trtllm"), **kwargs,
                systems_path=systems_path)
    if case is not None:
        follow_tied_picks(out, case, p["total_gpus"])
    result = save_sweep(
        out, save_dir=folder, model=p["model"], system=p["system"],
        backend=p.get("backend", "trtllm"), total_gpus=p["total_gpus"],
        isl=p.get("isl", 4000), osl=p.get("osl", 1000), prefix=p.get("prefix", 0),
        ttft=p.get("ttft", 2000.0), tpot=p.get("tpot", 30.0),
        request_latency=p.get("request_latency"), nextn=p.get("nextn", 0),
        nextn_accepted=p.get("nextn_accepted"), options=options, replay=False, suffix=0,
        systems_path=systems_path)
    return result.path


# ------------------------------------------------------------------------------ reading


def _cell(text: str):
    if text == "":
        return ""
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def read_csv(path: str) -> dict:
    """A CSV as ``{columns, rows}`` with typed cells (the goldens' form)."""
    with open(path, newline="", encoding="utf-8") as fh:
        table = list(csv.reader(fh))
    return {"columns": table[0] if table else [], "rows": [[_cell(c) for c in r]
                                                           for r in table[1:]]}


def diff_csv(ours: dict, ref: dict, rtol: float) -> list[str]:
    """Differences between two typed tables (the golden's rows are objects keyed by column)."""
    ref = {"columns": ref["columns"],
           "rows": [[r[c] for c in ref["columns"]] if isinstance(r, dict) else r
                    for r in ref["rows"]]}
    if ours["columns"] != ref["columns"]:
        return [f"columns differ: {ours['columns']} vs {ref['columns']}"[:400]]
    if len(ours["rows"]) != len(ref["rows"]):
        return [f"{len(ours['rows'])} rows vs {len(ref['rows'])}"]
    out = []
    for i, (a_row, b_row) in enumerate(zip(ours["rows"], ref["rows"])):
        for col, a, b in zip(ref["columns"], a_row, b_row):
            if isinstance(a, (int, float)) and isinstance(b, (int, float)):
                if type(a) is not type(b):
                    out.append(f"row {i} {col}: {a!r} vs {b!r} (int/float kind)")
                elif a != b and not (math.isfinite(b) and b != 0
                                     and abs(a - b) / abs(b) <= rtol):
                    out.append(f"row {i} {col}: {a!r} vs {b!r}")
            elif a != b:
                out.append(f"row {i} {col}: {a!r} vs {b!r}")
    return out


def read_content(path: str):
    """An in-scope file as the goldens hold it: scripts as lines, YAML parsed (several
    documents as a list)."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    if path.endswith(".sh"):
        return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
    docs = list(yaml.safe_load_all(text))
    return docs[0] if len(docs) == 1 else docs


# ------------------------------------------------------------------------------ §16 corrections


def _is_moe(model: str) -> bool:
    from ..deploy.save import model_facts

    return model_facts(model)[2]


def _corrected_roles(row: dict, mode: str, backend: str, is_moe: bool) -> dict:
    """``{role: corrected GPUs}`` of the attention-DP MoE roles of a SGLang / TRT-LLM row."""
    if backend not in ("sglang", "trtllm") or not is_moe:
        return {}
    prefixes = {"agg": ""} if mode == "agg" else {"prefill": "(p)", "decode": "(d)"}
    out = {}
    for role, pre in prefixes.items():
        if (row.get(f"{pre}dp") or 1) > 1:
            out[role] = row[f"{pre}tp"] * row[f"{pre}pp"] * row[f"{pre}dp"]
    return out


def _row_gpus(row: dict, mode: str) -> dict:
    prefixes = {"agg": ""} if mode == "agg" else {"prefill": "(p)", "decode": "(d)"}
    return {role: row[f"{pre}tp"] * row[f"{pre}pp"] * row[f"{pre}dp"]
            for role, pre in prefixes.items()}


def _pack(mode: str, workers: dict, gpus: dict) -> list[dict]:
    nodes: list[dict] = []

    def place(role):
        for node in nodes:
            if node["used"] + gpus[role] <= GPUS_PER_NODE:
                node["used"] += gpus[role]
                node[role] = node.get(role, 0) + 1
                return
        nodes.append({"used": gpus[role], role: 1})

    if mode == "agg":
        for _ in range(workers["agg"]):
            place("agg")
    else:
        g = math.gcd(workers["prefill"], workers["decode"]) or 1
        for _ in range(g):
            for _ in range(workers["prefill"] // g):
                place("prefill")
            for _ in range(workers["decode"] // g):
                place("decode")
    return nodes


def _workers(row: dict, mode: str, total: int) -> dict:
    g = _row_gpus(row, mode)
    if mode == "agg":
        return {"agg": total // g["agg"]}
    replicas = total // (row["(p)workers"] * g["prefill"] + row["(d)workers"] * g["decode"])
    return {"prefill": replicas * row["(p)workers"], "decode": replicas * row["(d)workers"]}


def _block(lines: list[str], role: str) -> list[str]:
    start = next((i for i, line in enumerate(lines) if line.startswith(f"{role.upper()}_GPU=")),
                 None)
    if start is None:
        return []
    end = next(i for i in range(start, len(lines)) if lines[i] == "done")
    return lines[start:end + 1]


def _patch_counts(lines: list[str], values: dict) -> list[str]:
    out = []
    for line in lines:
        name = line.split("=", 1)[0]
        out.append(f"{name}={values[name]}" if name in values and "$" not in line else line)
    return out


def correct_pick(content: dict, row: dict, mode: str, backend: str, is_moe: bool,
                 total: int) -> dict:
    """The golden pick content with the §16.1 GPU correction applied."""
    corrected = _corrected_roles(row, mode, backend, is_moe)
    if not corrected:
        return content
    content = dict(content)
    gpus = _row_gpus(row, mode)
    names = {"agg": ("SGLangWorker", "TRTLLMWorker"),
             "prefill": ("SGLangPrefillWorker", "TRTLLMPrefillWorker"),
             "decode": ("SGLangDecodeWorker", "TRTLLMDecodeWorker")}
    if "k8s_deploy.yaml" in content:
        docs = content["k8s_deploy.yaml"]
        docs = [dict(d) for d in (docs if isinstance(docs, list) else [docs])]
        services = docs[0]["spec"]["services"]
        multinode = False
        for role in gpus:
            for name in names[role]:
                if name not in services:
                    continue
                svc = dict(services[name])
                if role in corrected:
                    svc["resources"] = dict(svc["resources"])
                    svc["resources"]["limits"] = {**svc["resources"]["limits"],
                                                  "gpu": str(corrected[role])}
                    if corrected[role] <= GPUS_PER_NODE:
                        svc.pop("multinode", None)
                        svc["resources"].pop("claims", None)
                        svc["extraPodSpec"] = {k: v for k, v in svc["extraPodSpec"].items()
                                               if k != "resourceClaims"}
                multinode = multinode or "multinode" in svc
                services[name] = svc
        if not multinode:
            docs = [d for d in docs if d.get("kind") != "ComputeDomain"]
        content["k8s_deploy.yaml"] = docs[0] if len(docs) == 1 else docs
    workers = _workers(row, mode, total)
    nodes = _pack(mode, workers, gpus)
    scripts = sorted((k for k in content if re.fullmatch(r"run_\d+\.sh", k)),
                     key=lambda k: int(k[4:-3]))
    if len(nodes) == 1 and len(scripts) > 1:
        merged = list(content[scripts[0]])
        for role in ("prefill", "decode"):
            if not _block(merged, role):
                for other in scripts[1:]:
                    block = _block(content[other], role)
                    if block:
                        merged = merged[:-1] + block + merged[-1:]
                        break
        for other in scripts[1:]:
            del content[other]
        content[scripts[0]] = merged
        scripts = scripts[:1]
    for i, name in enumerate(scripts):
        node = nodes[i] if i < len(nodes) else {}
        values = {"AGG_GPU": gpus.get("agg"), "PREFILL_GPU": gpus.get("prefill"),
                  "DECODE_GPU": gpus.get("decode"), "AGG_WORKERS": node.get("agg", 0),
                  "PREFILL_WORKERS": node.get("prefill", 0),
                  "DECODE_WORKERS": node.get("decode", 0),
                  "DECODE_GPU_OFFSET": node.get("prefill", 0) * gpus.get("prefill", 0)}
        content[name] = _patch_counts(content[name], {k: v for k, v in values.items()
                                                      if v is not None})
    return content


def correct_bench(content: dict, mode: str, has_namespace: bool) -> dict:
    """The §16.2 correction of the benchmark Job without ``--namespace``."""
    if has_namespace or "k8s_bench.yaml" not in content:
        return content
    job = content["k8s_bench.yaml"]
    job = {**job, "metadata": {k: v for k, v in job["metadata"].items() if k != "namespace"}}
    container = dict(job["spec"]["template"]["spec"]["containers"][0])
    container["args"] = [a.replace(f"dynamo-{mode}-frontend.None.svc.cluster.local",
                                   f"dynamo-{mode}-frontend") for a in container["args"]]
    spec = {**job["spec"]["template"]["spec"], "containers": [container]}
    job["spec"] = {**job["spec"], "template": {**job["spec"]["template"], "spec": spec}}
    return {**content, "k8s_bench.yaml": job}


# ------------------------------------------------------------------------------ the check


def _files(folder: str) -> set:
    return {f for f in os.listdir(folder) if os.path.isfile(os.path.join(folder, f))}


def compare_tree(case: dict, root: str, rtol: float, systems_path=None) -> list[tuple]:
    """``[(kind, passed, detail)]``: the checks of one case against the tree at ``root``."""
    params = parse_args(case["args"])
    checks = []
    ref_root = {os.path.splitext(f)[0] for f in case["root_files"]}
    our_root = {os.path.splitext(f)[0] for f in _files(root)}
    checks.append(("tree", ref_root == our_root, f"root files {sorted(our_root)} vs "
                                                 f"{sorted(ref_root)}"))
    our_modes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    checks.append(("tree", our_modes == sorted(case["modes"]),
                   f"mode folders {our_modes} vs {sorted(case['modes'])}"))
    is_moe = _is_moe(params["model"])
    backend = params.get("backend", "trtllm")
    for mode, ref in case["modes"].items():
        folder = os.path.join(root, mode)
        if not os.path.isdir(folder):
            continue
        files = _files(folder)
        checks.append(("tree", files == set(ref["files"]),
                       f"{mode}: files {sorted(files)} vs {sorted(ref['files'])}"))
        for name in ("best_config_topn", "pareto"):
            path = os.path.join(folder, f"{name}.csv")
            if os.path.isfile(path):
                problems = diff_csv(read_csv(path), ref[name], rtol)
                checks.append(("csv", not problems, f"{mode}/{name}.csv: "
                                                    + "; ".join(problems[:5])))
        path = os.path.join(folder, "exp_config.yaml")
        if os.path.isfile(path):
            problems = diff_values(read_content(path), ref["exp_config"], "exp_config", rtol)
            checks.append(("exp_config", not problems,
                           f"{mode}/exp_config.yaml: " + "; ".join(problems[:5])))
        columns = ref["best_config_topn"]["columns"]
        ref_rows = [r if isinstance(r, dict) else dict(zip(columns, r))
                    for r in ref["best_config_topn"]["rows"]]
        our_picks = sorted(d for d in os.listdir(folder)
                           if os.path.isdir(os.path.join(folder, d)))
        checks.append(("tree", our_picks == sorted(ref["picks"]),
                       f"{mode}: picks {our_picks} vs {sorted(ref['picks'])}"))
        for pick, ref_pick in ref["picks"].items():
            pick_dir = os.path.join(folder, pick)
            if not os.path.isdir(pick_dir):
                continue
            row = ref_rows[int(pick[3:]) - 1]
            expected = correct_pick(ref_pick["content"], row, mode, backend, is_moe,
                                    params["total_gpus"])
            expected = correct_bench(expected, mode, "namespace" in params)
            ours = _files(pick_dir)
            in_scope = ours - set(AIC_EXTRA_PICK_FILES)
            extra_golden = set(ref_pick["files"]) - set(ref_pick["content"]) - set(OUT_OF_SCOPE)
            checks.append(("tree", in_scope == set(expected) and not extra_golden,
                           f"{mode}/{pick}: files {sorted(in_scope)} vs {sorted(expected)}"))
            for name, ref_content in expected.items():
                path = os.path.join(pick_dir, name)
                if not os.path.isfile(path):
                    continue
                mine = read_content(path)
                if name.endswith(".sh"):
                    problems = [f"line {i + 1}: {a!r} vs {b!r}"
                                for i, (a, b) in enumerate(zip(mine, ref_content)) if a != b]
                    if len(mine) != len(ref_content):
                        problems.append(f"{len(mine)} lines vs {len(ref_content)}")
                else:
                    problems = diff_values(mine, ref_content, name, rtol)
                checks.append(("file", not problems,
                               f"{mode}/{pick}/{name}: " + "; ".join(problems[:4])))
    return checks


def run_deploy_case(case: dict, report, *, systems_path=None) -> None:
    """Runs one deploy case and appends its checks to ``report``."""
    try:
        with tempfile.TemporaryDirectory(prefix="aic-deploy-parity-") as tmp:
            root = run_tree(parse_args(case["args"]), tmp, systems_path, case)
            checks = compare_tree(case, root, report.rtol, systems_path)
    except Exception as exc:  # noqa: BLE001 - a harness failure is a failed check
        checks = [("tree", False, f"harness error {type(exc).__name__}: {exc}"[:600])]
    for kind, passed, detail in checks:
        report.checks.append(Check(case["id"], FAMILY, f"deploy_{kind}", -1, passed,
                                   "" if passed else detail[:600], args=None))
