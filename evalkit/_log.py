"""How much the libraries evalkit drives may log: ``EVALKIT_LOG_LEVEL`` (DEBUG, INFO,
WARNING, ERROR; default WARNING), or ``-v`` (INFO) / ``-vv`` (DEBUG) on ``evalkit run``.
evalkit's own output is its progress bars, summary and errors; litellm's per-call INFO lines
and debug banners appear only when asked for."""

from __future__ import annotations

import logging
import os

from evalkit.errors import ConfigError

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
ENV = "EVALKIT_LOG_LEVEL"
VERBOSE_FLAGS = {"-v": "INFO", "--verbose": "INFO", "-vv": "DEBUG"}


def log_level() -> int:
    """The level asked for in ``EVALKIT_LOG_LEVEL`` (WARNING when unset); a one-line
    :class:`ConfigError` naming the valid values otherwise."""
    name = os.environ.get(ENV, "").strip().upper() or "WARNING"
    if name not in LEVELS:
        raise ConfigError(f"{ENV}: {os.environ[ENV]!r} is not a log level; use "
                          f"{', '.join(LEVELS[:-1])} or {LEVELS[-1]} (default: WARNING)")
    return int(logging.getLevelName(name))


def take_verbose_flags(argv: list[str]) -> list[str]:
    """``argv`` without ``-v``/``-vv``/``--verbose``, which set ``EVALKIT_LOG_LEVEL`` (in the
    environment, so a sweep's job processes see it too)."""
    rest = [a for a in argv if a not in VERBOSE_FLAGS]
    asked = [VERBOSE_FLAGS[a] for a in argv if a in VERBOSE_FLAGS]
    if asked:
        os.environ[ENV] = "DEBUG" if "DEBUG" in asked or len(asked) > 1 else "INFO"
    return rest


def quiet_litellm(level: int) -> None:
    """litellm's loggers at ``level`` (WARNING by default), each line printed once by
    litellm's own handler, not again by the root handler Hydra installs (set before the
    import, so what the import itself logs obeys too)."""
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        logger = logging.getLogger(name)
        logger.setLevel(level)
        logger.propagate = False
