"""Dynamo releases, the backend versions each maps to, and the images (spec 60 §7.2, §7.3).

The backend version picks the engine-flag template and, for vLLM, the disaggregation role flags;
the Dynamo version is the image tag. Kept as data so an unknown version can name the known
ones."""

from __future__ import annotations

from .errors import DeployError

#: Dynamo release -> (vLLM, SGLang, TRT-LLM) versions, first = default (spec 60 §7.3).
DYNAMO_VERSIONS = {
    "1.3.0": ("0.24.0", "0.5.16", "1.3.0rc23"),
    "1.2.0": ("0.20.1", "0.5.11", "1.3.0rc14"),
    "1.1.0": ("0.19.0", "0.5.10.post1", "1.3.0rc11"),
    "1.0.0": ("0.16.0", "0.5.9", "1.3.0rc5.post1"),
    "0.9.0": ("0.14.1", "0.5.8", "1.3.0rc1"),
    "0.8.1.post1": ("0.12.0", "0.5.6.post2", "1.2.0rc6.post1"),
    "0.8.1": ("0.12.0", "0.5.6.post2", "1.2.0rc6.post1"),
    "0.8.0": ("0.12.0", "0.5.6.post2", "1.2.0rc6.post1"),
    "0.7.1": ("0.11.0", "0.5.4.post3", "1.2.0rc3"),
    "0.7.0.post1": ("0.11.0", "0.5.4.post3", "1.2.0rc3"),
    "0.7.0": ("0.11.0", "0.5.4.post3", "1.2.0rc2"),
    "0.6.1.post1": ("0.11.0", "0.5.3.post2", "1.1.0rc5"),
    "0.6.1": ("0.11.0", "0.5.3.post2", "1.1.0rc5"),
    "0.6.0": ("0.11.0", "0.5.3.post2", "1.1.0rc5"),
}
DEFAULT_DYNAMO_VERSION = "1.3.0"
_BACKEND_INDEX = {"vllm": 0, "sglang": 1, "trtllm": 2}

#: The runtime image of each backend (spec 60 §7.2).
RUNTIME_IMAGES = {"vllm": "vllm-runtime", "sglang": "sglang-runtime",
                  "trtllm": "tensorrtllm-runtime"}
IMAGE_REPOSITORY = "nvcr.io/nvidia/ai-dynamo"
BENCH_IMAGE = "python:3.12-slim"


def resolve_dynamo_version(text: str | None) -> str:
    """The Dynamo release ``text`` names (a leading ``v`` is accepted; ``None`` = the default);
    :class:`DeployError` naming the known releases otherwise."""
    if text is None:
        return DEFAULT_DYNAMO_VERSION
    version = text[1:] if text.startswith("v") else text
    if version not in DYNAMO_VERSIONS:
        raise DeployError(f"--dynamo-version {text!r}: unknown Dynamo release; known: "
                          f"{', '.join(DYNAMO_VERSIONS)}")
    return version


def template_backend_version(dynamo_version: str, backend: str) -> str:
    """The backend version whose engine templates a Dynamo release uses (spec 60 §7.3)."""
    return DYNAMO_VERSIONS[dynamo_version][_BACKEND_INDEX[backend]]


def runtime_image(backend: str, dynamo_version: str) -> str:
    """``nvcr.io/nvidia/ai-dynamo/<runtime>:<dynamo version>`` (spec 60 §7.2)."""
    return f"{IMAGE_REPOSITORY}/{RUNTIME_IMAGES[backend]}:{dynamo_version}"


def version_tuple(text: str) -> tuple:
    """A comparable key of a release string (``1.3.0rc5.post1`` -> numbers, then pre-release
    rank), enough to order the versions of the table above."""
    import re

    m = re.match(r"^(\d+(?:\.\d+)*)(?:rc(\d+))?(?:\.post(\d+))?", text)
    if not m:
        return (0,)
    release = tuple(int(x) for x in m.group(1).split("."))
    rc = int(m.group(2)) if m.group(2) is not None else None
    post = int(m.group(3)) if m.group(3) is not None else 0
    return release + ((0, rc) if rc is not None else (1, 0)) + (post,)


def uses_disaggregation_mode_flag(dynamo_version: str) -> bool:
    """vLLM role flags: ``--disaggregation-mode`` from Dynamo 1.0, ``--is-prefill-worker`` /
    ``--is-decode-worker`` before (spec 60 §6.2, §7.3)."""
    return version_tuple(dynamo_version) >= version_tuple("1.0.0")
