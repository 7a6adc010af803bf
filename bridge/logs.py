"""Structured JSON logs: one JSON object per line, with the request id wherever a request is involved."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, TextIO

# keys of LogRecord that are not user data
_RESERVED = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """`log.info("event", extra={"id": 7, "op": "act"})` -> {"ts": ..., "level": "info", "event": "event", ...}."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def setup_json_logging(level: str = "info", stream: TextIO | None = None) -> logging.Handler:
    """Send the `bridge` loggers to `stream` (stderr) as JSON lines; returns the handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("bridge")
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False
    return handler

