"""The generator's options (spec 60 §11): the deployment target, Dynamo release, namespace,
model cache, transport, pull secret and the ``--set KEY=VALUE`` overrides, each checked before
anything is written (an unknown target or release names the known ones, a name that is not a
DNS-1123 label says so, a ``--set`` key the generator does not know lists the known ones)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import DeployError
from .facts import TRANSPORTS
from .versions import resolve_dynamo_version

#: Deployment targets (spec 60 §5, §9, §10); ``dynamo-j2`` is the reference's name of ``dynamo``.
TARGETS = ("dynamo", "llm-d-helm", "llm-d-kustomize")
TARGET_ALIASES = {"dynamo-j2": "dynamo"}

#: ``--set`` keys the generator knows, with the kind of value each takes.
SET_KEYS = {
    "rule": ("production", "benchmark"),
    "preserve_engine_limits": bool,
    "K8sConfig.k8s_image": str,
    "K8sConfig.name_prefix": "dns",
    "K8sConfig.name": "dns",
    "K8sConfig.k8s_engine_mode": ("inline",),
    "ServiceConfig.served_model_name": str,
    "ServiceConfig.port": int,
    "WorkerConfig.agg_workers": int,
    "WorkerConfig.prefill_workers": int,
    "WorkerConfig.decode_workers": int,
    "BenchConfig.estimated_concurrency": int,
    "DynConfig.enable_router": bool,
    "LlmdConfig.vllm_image": str,
    "LlmdConfig.sglang_image": str,
    "LlmdConfig.hf_token_secret": str,
    "LlmdConfig.kustomize_base_path": str,
    "LlmdConfig.kustomize_name_prefix": str,
}

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def check_dns_label(what: str, value: str) -> str:
    """``value`` if it is a DNS-1123 label (lower-case letters, digits and ``-``, at most 63
    characters, starting and ending with a letter or digit), else :class:`DeployError`."""
    if not isinstance(value, str) or not _DNS_LABEL.match(value):
        raise DeployError(f"{what} {value!r} is not a DNS-1123 label (lower-case letters, "
                          f"digits and '-', 1-63 characters, starting and ending with a letter "
                          f"or digit)")
    return value


#: Backends each target has templates for (spec 60 §5, §9, §10).
TARGET_BACKENDS = {"dynamo": ("vllm", "sglang", "trtllm"), "llm-d-helm": ("vllm", "sglang"),
                   "llm-d-kustomize": ("vllm",)}


def check_target_backend(target: str, backend: str) -> None:
    """A target that has no templates for ``backend`` is a :class:`DeployError` naming the
    targets that do."""
    target = TARGET_ALIASES.get(target, target)
    if backend == "auto":
        # --backend auto deploys each pick on its own backend: the target must cover all three.
        missing = [b for b in ("trtllm", "sglang", "vllm")
                   if target in TARGET_BACKENDS and b not in TARGET_BACKENDS[target]]
        if missing:
            raise DeployError(f"--deployment-target {target} with --backend auto: {target} has no "
                              f"template for {', '.join(missing)}, which auto may pick; give one "
                              f"backend, or use dynamo")
        return
    if target in TARGET_BACKENDS and backend not in TARGET_BACKENDS[target]:
        fits = [t for t, b in TARGET_BACKENDS.items() if backend in b]
        raise DeployError(f"--deployment-target {target}: llm-d has no {target[6:]} template "
                          f"for {backend} ({target} covers {', '.join(TARGET_BACKENDS[target])});"
                          f" use {' or '.join(fits)}")


def _literal(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "none"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_set(items) -> dict:
    """``["KEY=VALUE", ...]`` as ``{key: value}``; values are literals where they parse
    (numbers, true/false, null). Unknown keys and values of the wrong kind are a
    :class:`DeployError`."""
    out: dict = {}
    for item in items or ():
        key, eq, text = str(item).partition("=")
        key = key.strip()
        if not eq or not key:
            raise DeployError(f"--set {item!r}: expected KEY=VALUE")
        if key not in SET_KEYS:
            raise DeployError(f"--set {key}: unknown key; known keys: {', '.join(SET_KEYS)}")
        value = _literal(text.strip())
        kind = SET_KEYS[key]
        if isinstance(kind, tuple):
            if value not in kind:
                raise DeployError(f"--set {key}={text}: expected one of {', '.join(kind)}")
        elif kind == "dns":
            check_dns_label(f"--set {key}", str(value))
            value = str(value)
        elif kind is bool:
            if not isinstance(value, bool):
                raise DeployError(f"--set {key}={text}: expected true or false")
        elif kind is int:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DeployError(f"--set {key}={text}: expected an integer >= 1")
        else:
            value = str(text.strip())
            if not value:
                raise DeployError(f"--set {key}: expected a non-empty value")
        out[key] = value
    return out


@dataclass(frozen=True)
class ModelCache:
    """``--model-cache NAME[:MOUNT[:SUBPATH]]`` (spec 60 §6.4)."""

    pvc: str
    mount: str = "/workspace/model_cache"
    subpath: str | None = None

    @classmethod
    def parse(cls, text: str) -> "ModelCache":
        """Reads ``NAME[:MOUNT[:SUBPATH]]``; the PVC name must be a DNS-1123 name."""
        parts = text.split(":")
        if len(parts) > 3 or not parts[0]:
            raise DeployError(f"--model-cache {text!r}: expected NAME[:MOUNT[:SUBPATH]]")
        name = parts[0]
        if not re.match(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$", name):
            raise DeployError(f"--model-cache {text!r}: the PVC name {name!r} is not a DNS-1123 "
                              f"name (lower-case letters, digits, '-' and '.')")
        mount = parts[1] if len(parts) > 1 and parts[1] else "/workspace/model_cache"
        if not mount.startswith("/"):
            raise DeployError(f"--model-cache {text!r}: the mount path {mount!r} must be "
                              f"absolute")
        subpath = parts[2] if len(parts) > 2 and parts[2] else None
        return cls(name, mount, subpath)

    @property
    def hf_home(self) -> str | None:
        """``MOUNT/SUBPATH`` without a trailing ``/``, when a sub-path is given."""
        if self.subpath is None:
            return None
        return f"{self.mount.rstrip('/')}/{self.subpath}".rstrip("/")


@dataclass(frozen=True)
class GeneratorOptions:
    """Everything the generator takes besides the pick: the target and the cluster options
    (spec 60 §11). Build it with :meth:`create`, which checks every value."""

    target: str = "dynamo"
    dynamo_version: str = "1.3.0"
    namespace: str | None = None
    model_cache: ModelCache | None = None
    transport: str = "nvlink"
    image_pull_secret: str | None = None
    sets: dict = field(default_factory=dict)

    @classmethod
    def create(cls, *, target: str | None = None, dynamo_version: str | None = None,
               namespace: str | None = None, model_cache: str | None = None,
               transport: str | None = None, image_pull_secret: str | None = None,
               sets=None) -> "GeneratorOptions":
        """Checked options; every bad value is a :class:`DeployError` naming the option."""
        target = target or "dynamo"
        target = TARGET_ALIASES.get(target, target)
        if target not in TARGETS:
            raise DeployError(f"--deployment-target {target!r}: unknown target; known: "
                              f"{', '.join(TARGETS)}")
        version = resolve_dynamo_version(dynamo_version)
        if namespace is not None:
            check_dns_label("--namespace", namespace)
        cache = ModelCache.parse(model_cache) if model_cache else None
        transport = transport or "nvlink"
        if transport not in TRANSPORTS:
            raise DeployError(f"--transport {transport!r}: unknown transport; known: "
                              f"{', '.join(TRANSPORTS)}")
        if image_pull_secret is not None:
            check_dns_label("--image-pull-secret", image_pull_secret)
        parsed = sets if isinstance(sets, dict) else parse_set(sets)
        return cls(target, version, namespace, cache, transport, image_pull_secret, parsed)

    def get(self, key: str, default=None):
        """A ``--set`` value, or ``default``."""
        return self.sets.get(key, default)

    def to_dict(self) -> dict:
        """The options as the experiment record keeps them."""
        cache = None
        if self.model_cache is not None:
            cache = ":".join(x for x in (self.model_cache.pvc, self.model_cache.mount,
                                         self.model_cache.subpath) if x)
        return {"target": self.target, "dynamo_version": self.dynamo_version,
                "namespace": self.namespace, "model_cache": cache,
                "transport": self.transport, "image_pull_secret": self.image_pull_secret,
                "set": [f"{k}={v}" for k, v in self.sets.items()]}
