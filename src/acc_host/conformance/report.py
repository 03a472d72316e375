"""The outcome of a conformance run: one :class:`CheckResult` per check,
gathered in a :class:`Report` that prints as text or JSON.

A check function signals its outcome by returning a short detail (PASS), or
by raising :class:`CheckFailed` (FAIL) or :class:`CheckSkipped` (SKIP). Any
other exception raised by a check is a FAIL carrying the exception's text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["PASS", "FAIL", "SKIP", "STATUSES", "CheckResult", "Report", "CheckFailed",
           "CheckSkipped"]

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
STATUSES = (PASS, FAIL, SKIP)


class CheckFailed(Exception):
    """Raised by a check: the plugin breaks the contract (detail in the message)."""


class CheckSkipped(Exception):
    """Raised by a check that does not apply to the plugin (reason in the message)."""


@dataclass(frozen=True)
class CheckResult:
    """One check: a stable dotted ``id``, ``status`` (PASS, FAIL or SKIP), a
    ``detail`` (one line; a crash adds the lines of its first report) and how
    long it took in seconds."""

    id: str
    status: str
    detail: str = ""
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {STATUSES}")

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "status": self.status, "detail": self.detail,
                "seconds": round(self.seconds, 4)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckResult:
        return cls(str(data["id"]), str(data["status"]), str(data.get("detail", "")),
                   float(data.get("seconds", 0.0)))


@dataclass
class Report:
    """Every check run against one library."""

    path: str
    results: list[CheckResult] = field(default_factory=list)
    devices: list[int] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when no check failed (skipped checks do not count against)."""
        return all(result.status != FAIL for result in self.results)

    def counts(self) -> dict[str, int]:
        """How many checks ended with each status."""
        return {status: sum(result.status == status for result in self.results)
                for status in STATUSES}

    def by_id(self) -> dict[str, CheckResult]:
        return {result.id: result for result in self.results}

    def failed(self) -> list[CheckResult]:
        return [result for result in self.results if result.status == FAIL]

    def summary(self) -> str:
        counts = self.counts()
        verdict = "conforms" if self.passed else "does NOT conform"
        return (f"{self.path}: {verdict}: {counts[PASS]} passed, {counts[FAIL]} failed, "
                f"{counts[SKIP]} skipped ({len(self.results)} checks)")

    def format_text(self) -> str:
        """One line per check, ``STATUS  id  detail``, then the summary line.
        A detail of several lines (a crash report) continues indented."""
        width = max((len(result.id) for result in self.results), default=0)
        lines = []
        for result in self.results:
            first, *rest = result.detail.split("\n") if result.detail else [""]
            lines.append(f"{result.status}  {result.id.ljust(width)}  {first}".rstrip())
            lines.extend(f"      {line}".rstrip() for line in rest)
        lines.append(self.summary())
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "passed": self.passed, "devices": list(self.devices),
                "counts": self.counts(), "results": [result.to_json() for result in self.results]}
