"""The results of a parity run: one :class:`Check` per compared answer, gathered in a
:class:`Report`. Apart from the runner so that the serving and surface checks, which the runner
calls, can record checks without importing the runner back."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Check:
    case_id: str
    family: str
    kind: str  # "compile", "memory" or a query kind
    index: int  # query index in the case (-1 for compile and memory)
    passed: bool
    detail: str = ""
    rel_err: float | None = None
    args: dict | None = None


@dataclass
class Report:
    rtol: float
    checks: list[Check] = field(default_factory=list)
    worst: list[tuple[float, str, str, int]] = field(default_factory=list)
    source_mismatches: list[str] = field(default_factory=list)
    class_mismatches: list[str] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(1 for c in self.checks if c.passed)

    @property
    def failed(self) -> int:
        return sum(1 for c in self.checks if not c.passed)

    def family_counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for check in self.checks:
            entry = out.setdefault(check.family, {"passed": 0, "failed": 0})
            entry["passed" if check.passed else "failed"] += 1
        return out

    def kind_counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for check in self.checks:
            entry = out.setdefault(check.kind, {"passed": 0, "failed": 0})
            entry["passed" if check.passed else "failed"] += 1
        return out

    def worst_errors(self, count: int = 10) -> list[tuple[float, str, str, int]]:
        return sorted(self.worst, key=lambda w: -w[0])[:count]

    def summary_line(self) -> str:
        return f"{self.passed} passed, {self.failed} failed"

    def to_json(self) -> dict:
        failures = [asdict(c) for c in self.checks if not c.passed]
        return {
            "rtol": self.rtol,
            "passed": self.passed,
            "failed": self.failed,
            "families": self.family_counts(),
            "kinds": self.kind_counts(),
            "worst": [
                {"rel_err": w[0], "case_id": w[1], "kind": w[2], "index": w[3]}
                for w in self.worst_errors(20)
            ],
            "failures": failures,
            "source_mismatches": len(self.source_mismatches),
            "error_class_mismatches": len(self.class_mismatches),
        }
