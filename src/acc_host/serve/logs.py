"""Structured logs: every record of the servers' loggers (acc_host.serve,
KServe's, uvicorn's, Ray Serve's in a replica) as one JSON object a line,
with the record's extra fields (model, outcome, seconds, batch...)."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

__all__ = ["JsonFormatter", "configure_json_logging", "logger", "LOGGERS"]

logger = logging.getLogger("acc_host.serve")

#: The loggers whose handlers get the JSON format.
LOGGERS = ("acc_host.serve", "kserve", "kserve.trace", "uvicorn", "uvicorn.error",
           "uvicorn.access", "ray.serve")

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message",
                                                                              "asctime"}


class JsonFormatter(logging.Formatter):
    """A record as JSON: time (ISO 8601, UTC), level, logger, message, the
    exception if any, and the extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value if isinstance(value, (str, int, float, bool, type(None))) \
                    else str(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


JsonFormatter.converter = __import__("time").gmtime  # type: ignore[assignment]


def configure_json_logging(level: int = logging.INFO) -> None:
    """Gives the servers' loggers JSON formatting: each keeps its handlers
    (re-formatted); one without handlers gets a stderr handler."""
    formatter = JsonFormatter()
    for name in LOGGERS:
        log = logging.getLogger(name)
        if not log.handlers and name == "acc_host.serve":
            log.addHandler(logging.StreamHandler(sys.stderr))
            log.propagate = False
        for handler in log.handlers:
            handler.setFormatter(formatter)
    logger.setLevel(level)
