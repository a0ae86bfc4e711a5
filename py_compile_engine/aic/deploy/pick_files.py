"""The files of one pick folder per target (spec 60 §5, §9, §10), as data: YAML documents,
shell scripts and TRT-LLM engine configs, keyed by file name. Nothing is written here."""

from __future__ import annotations

from dataclasses import dataclass

from .bench import bench_job, bench_run_script
from .dynamo import deployment_documents
from .llmd import helm_values, kustomize_files
from .params import PickParams
from .run_scripts import run_scripts
from .trtllm_config import engine_config


@dataclass(frozen=True)
class FileContent:
    """One file to write: ``kind`` ``yaml`` (one document), ``yaml_docs`` (several), ``json``
    or ``text`` (a script, written as is); ``executable`` for scripts."""

    kind: str
    data: object
    executable: bool = False


def pick_files(pick: PickParams) -> dict[str, FileContent]:
    """``{file name: content}`` of the pick folder for the pick's target."""
    target = pick.options.target
    out: dict[str, FileContent] = {}
    if target == "dynamo":
        docs = deployment_documents(pick)
        out["k8s_deploy.yaml"] = (FileContent("yaml", docs[0]) if len(docs) == 1
                                  else FileContent("yaml_docs", docs))
        out["bench_run.sh"] = FileContent("text", bench_run_script(pick), executable=True)
        out["k8s_bench.yaml"] = FileContent("yaml", bench_job(pick))
        if pick.backend == "trtllm":
            for role in pick.role_names:
                out[f"{role}_config.yaml"] = FileContent("yaml", engine_config(pick, role))
    elif target == "llm-d-helm":
        out["llm-d-values.yaml"] = FileContent("yaml", helm_values(pick))
    else:
        for name, data in kustomize_files(pick).items():
            out[name] = FileContent("yaml", data)
    for name, text in run_scripts(pick).items():
        out[name] = FileContent("text", text, executable=True)
    return out
