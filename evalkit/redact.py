"""Secrets never reach what a run writes or prints: this module masks them.

What counts as a secret (the class, not a list of known keys):

- the value of every environment variable with a secret-looking name (``*_API_KEY``,
  ``*SECRET*``, ``*PASSWORD*``, ``*_TOKEN``, ...), and of every config key with such a name;
- values registered while a run is set up: the key an LLM judge reads from the variable
  its ``api_key_env`` names, the credentials inside an ``api_base``, and every value a
  config reads from the environment (``${oc.env:NAME}``, :func:`register_env_resolver`),
  whatever the variable's name, but evalkit's own settings and the variables listed in
  ``EVALKIT_PUBLIC_ENV``;
- in any text: the user-info of a URL (``https://user:key@host``), the values of secret-ish
  query parameters (``?key=``, ``&api_key=``, ``token``, ``sig``, ...), the credentials of an
  ``Authorization``/``x-api-key``/``X-Auth-Token``/``Private-Token`` header or a ``Bearer``
  token echoed back by a server, and keys known by their shape (``sk-``, GitHub ``ghp_``
  and ``github_pat_``, Hugging Face ``hf_``, AWS ``AKIA``, Slack ``xox?-``, Google
  ``AIza``, GitLab ``glpat-``).

:func:`mask` is applied to a judge's answers and errors before they are parsed, cached or
stored, to the manifest, to error lines on the console; :func:`mask_tree` to the config kept
in the manifest; :func:`hide_secret_overrides` keeps secret command-line values out of a
sweep's ``multirun.yaml`` and console by handing them to the jobs through the environment."""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = [
    "MASK", "OVERRIDE_ENV", "PUBLIC_ENV", "REDACTED", "SECRET_NAME", "hide_secret_overrides",
    "is_secret_name", "mask", "mask_override", "mask_tree", "register_env_resolver",
    "register_secret", "register_tree", "register_url", "secret_values",
]

REDACTED = "***redacted***"
MASK = "***"
# a name whose value is a secret; ``*_env`` keys name a variable and are not secrets themselves
SECRET_NAME = re.compile(
    r"(?i)(api[_-]?key|secret|passw(or)?d|auth(orization)?$|credential|bearer|(^|[_-])token$"
    r"|access[_-]?key|private[_-]?key)")
OVERRIDE_ENV = "EVALKIT_SECRET_OVERRIDE_"  # secret command-line values handed to the jobs
_MIN_ENV_SECRET = 8  # shorter values of secret-named variables are not masked by value
_MIN_SECRET = 6  # nor shorter registered values (they would mask ordinary words)

# (to the authority's last @: a password may hold an unescaped one)
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^\s/?#'\"<>]+)@")
# a query parameter whose name ends in one of these words (api_key, apiKey, access_token,
# X-Amz-Signature, sig; not author or keyword)
_SECRET_PARAM = (r"(?:[\w.\-]*[_.\-])?(?:api_?key|key|token|secret|passw(?:or)?d|pwd"
                 r"|sig(?:nature)?|auth|credentials?)")
_SECRET_QUERY = re.compile(rf"(?i)([?&;]{_SECRET_PARAM}=)([^&#\s'\"<>]+)")
_AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization|x-api-key|api[-_]key|x-goog-api-key|x-auth-token"
    r"|private-token|x-access-token)(['\"]?\s*[:=]\s*"
    r"['\"]?)((?:bearer|basic|token)\s+)?([^\s'\",;}&]+)")
_BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+)(?!\*\*\*)[A-Za-z0-9._~+/\-]{8,}=*")
# keys known by their shape whoever holds them (the shapes secret scanners look for):
# OpenAI and Anthropic, GitHub, Hugging Face, AWS access key ids, Slack, Google, GitLab
# (prefix, the rest of the key): the prefix, literal, is also what a text is searched for
_KEY_SHAPES = (
    ("sk-", r"[A-Za-z0-9_\-]{16,}"), ("ghp_", r"[A-Za-z0-9]{30,}"),
    ("gho_", r"[A-Za-z0-9]{30,}"), ("ghu_", r"[A-Za-z0-9]{30,}"),
    ("ghs_", r"[A-Za-z0-9]{30,}"), ("ghr_", r"[A-Za-z0-9]{30,}"),
    ("github_pat_", r"[A-Za-z0-9_]{30,}"), ("hf_", r"[A-Za-z0-9]{30,}"),
    ("AKIA", r"[0-9A-Z]{16}\b"), ("ASIA", r"[0-9A-Z]{16}\b"),
    ("xox", r"[abposr]-[A-Za-z0-9\-]{10,}"), ("AIza", r"[0-9A-Za-z_\-]{35}"),
    ("glpat-", r"[A-Za-z0-9_\-]{20,}"))
_KEY_SHAPED = re.compile(r"\b(?:" + "|".join(re.escape(p) + rest for p, rest in _KEY_SHAPES)
                         + ")")

_registered: set[str] = set()

PUBLIC_ENV = "EVALKIT_PUBLIC_ENV"  # comma-separated variables whose values are not secrets
# variables that hold no secret: where things are, who runs them (evalkit's own settings,
# EVALKIT_*, are public too unless secret-named or a hidden override)
_PUBLIC_VARIABLES = frozenset({"HOME", "USER", "LOGNAME", "PWD", "TMPDIR", "TEMP", "TMP",
                               "LANG", "LC_ALL", "TZ", "HOSTNAME", "SHELL", "PATH"})


def is_secret_name(name: str) -> bool:
    """Whether a variable or config key of this name holds a secret."""
    return bool(SECRET_NAME.search(name)) and not name.lower().endswith("_env")


def register_secret(value: Any) -> None:
    """Mask ``value`` wherever it appears from now on in this process (a key read from the
    variable ``api_key_env`` names, credentials inside a URL)."""
    if isinstance(value, str) and len(value) >= _MIN_SECRET:
        _registered.add(value)


def _public_variable(name: str) -> bool:
    listed = {v.strip() for v in os.environ.get(PUBLIC_ENV, "").split(",") if v.strip()}
    if name in listed or name in _PUBLIC_VARIABLES:
        return True
    return name.startswith("EVALKIT_") and not name.startswith(OVERRIDE_ENV) and \
        not is_secret_name(name)


def register_env_resolver() -> None:
    """Make OmegaConf's ``${oc.env:NAME}`` register the value it reads as a secret, so it is
    masked wherever it is printed or stored (an alert's message, an error, the manifest),
    whatever NAME is called. Public variables (``HOME``, ``TMPDIR``, evalkit's own
    ``EVALKIT_*`` settings, those listed in ``EVALKIT_PUBLIC_ENV``) and defaults are
    shown as they are. Idempotent."""
    from omegaconf import OmegaConf
    from omegaconf._utils import _DEFAULT_MARKER_
    from omegaconf.resolvers import oc

    def env(key: str, default: Any = _DEFAULT_MARKER_) -> str | None:
        value = os.environ.get(key)
        if value is not None and not _public_variable(key):
            register_secret(value)
            register_url(value)
        return oc.env(key, default)

    resolver = OmegaConf._get_resolver("oc.env")
    if resolver is not None and resolver in _hooked:
        return
    OmegaConf.register_new_resolver("oc.env", env, replace=True, use_cache=False)
    _hooked.add(OmegaConf._get_resolver("oc.env"))


_hooked: set[Any] = set()  # the oc.env resolvers registered by register_env_resolver


def register_url(url: str | None) -> None:
    """Register the credentials inside ``url``: its user-info and password (as written and
    decoded) and the values of its secret-ish query parameters."""
    if not url or not isinstance(url, str):
        return
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        user, colon, password = userinfo.partition(":")
        # the password, or a user name standing alone for a token (https://TOKEN@host); a
        # user name beside a password is no secret, and masking it would mask ordinary words
        for piece in (userinfo, password if colon else user):
            register_secret(piece)
            register_secret(unquote(piece))
    for name, value in parse_qsl(parts.query, keep_blank_values=False):
        if re.fullmatch(_SECRET_PARAM, name, re.IGNORECASE):
            register_secret(value)


# the last scan of the environment: its size, the secret variables' names and values, and
# the values to mask (a judge masks every answer: scanning and classifying every variable
# each time cost more than the rest of the masking)
_scan: tuple[int, int, dict[str, str], list[str]] = (-1, -1, {}, [])


def secret_values() -> list[str]:
    """Every value masked by value, longest first (so no suffix of one is left behind).
    The environment is scanned again when its size, a secret variable's value or the
    registered values change."""
    global _scan
    size, registered, named, values = _scan
    if size == len(os.environ) and registered == len(_registered) and \
            all(os.environ.get(k) == v for k, v in named.items()):
        return values
    named = {k: v for k, v in os.environ.items()
             if v and (k.startswith(OVERRIDE_ENV)
                       or (len(v) >= _MIN_ENV_SECRET and is_secret_name(k)))}
    values = sorted({*_registered, *named.values()}, key=len, reverse=True)
    _scan = (len(os.environ), len(_registered), named, values)
    return values


def mask(text: str, secrets: list[str] | None = None) -> str:
    """``text`` with every secret masked (see the module's docstring); ``secrets``: the
    values from :func:`secret_values`, when the caller has them already."""
    if not text:
        return text
    for value in secret_values() if secrets is None else secrets:
        if value in text:
            text = text.replace(value, REDACTED)
    # each pattern runs only on a text that can hold it (most answers hold none)
    if "://" in text and "@" in text:
        text = _URL_USERINFO.sub(rf"\1{MASK}@", text)
    if "=" in text:
        text = _SECRET_QUERY.sub(rf"\1{MASK}", text)
    lower = text.lower()
    if "auth" in lower or "api-key" in lower or "api_key" in lower or "token" in lower:
        text = _AUTH_HEADER.sub(_header, text)
    if "bearer" in lower or "basic" in lower:
        text = _BEARER.sub(rf"\1\2{MASK}", text)
    if any(p in text for p, _ in _KEY_SHAPES):
        text = _KEY_SHAPED.sub(MASK, text)
    return text


def _header(m: re.Match[str]) -> str:
    return f"{m.group(1)}{m.group(2)}{m.group(3) or ''}{MASK}"


def mask_tree(node: Any, secrets: list[str] | None = None, by_name: bool = True) -> Any:
    """A copy of a plain tree (dicts, lists, scalars) with every string masked and, when
    ``by_name``, the values of secret-named keys replaced by ``***redacted***``."""
    if secrets is None:
        secrets = secret_values()
    if isinstance(node, dict):
        return {k: REDACTED if by_name and is_secret_name(str(k)) and v not in (None, "")
                else mask_tree(v, secrets, by_name) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [mask_tree(v, secrets, by_name) for v in node]
    if isinstance(node, str):
        return mask(node, secrets)
    return node


def register_tree(node: Any) -> None:
    """Register the secrets a resolved config holds: the values of secret-named keys and the
    credentials of every URL in it."""
    if isinstance(node, dict):
        for k, v in node.items():
            if is_secret_name(str(k)) and isinstance(v, str):
                register_secret(v)
            register_tree(v)
    elif isinstance(node, (list, tuple)):
        for v in node:
            register_tree(v)
    elif isinstance(node, str) and "://" in node:
        register_url(node)


def mask_override(override: str) -> str:
    """A command-line override (``key=value``) with a secret value masked."""
    key, eq, _ = override.partition("=")
    if eq and is_secret_name(key.rsplit(".", 1)[-1].lstrip("+~")):
        return f"{key}={REDACTED}"
    return mask(override)


def hide_secret_overrides(argv: list[str]) -> list[str]:
    """``argv`` (an ``evalkit run`` command line) with every secret override value moved to
    an environment variable (``EVALKIT_SECRET_OVERRIDE_<n>``) and replaced by
    ``${oc.env:...}``: Hydra writes overrides verbatim into a sweep's ``multirun.yaml`` and
    prints them on the console, while an interpolation is resolved only inside each job
    (which inherits the environment, on any launcher). A value of a secret-named key, or one
    holding a secret (URL credentials, a known key), is secret; each value of a sweep's
    list is handled on its own, so the sweep still has its jobs."""
    secrets = secret_values()
    out = []
    for arg in argv:
        key, eq, value = arg.partition("=")
        if not eq or arg.startswith("-") or key.startswith("hydra"):
            out.append(arg)
            continue
        named = is_secret_name(key.rsplit(".", 1)[-1].lstrip("+~"))
        if not named and mask(value, secrets) == value:
            out.append(arg)
            continue
        out.append(_hidden(arg, key, value, named, secrets))
    return out


def _hidden(arg: str, key: str, value: str, named: bool, secrets: list[str]) -> str:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_override(arg)
    except HydraException:
        return arg  # Hydra reports the bad override itself (it is not written anywhere)
    held = parsed.value()
    elements = held.list if isinstance(held, ChoiceSweep) else [held]
    if not all(_renderable(e) for e in elements):
        return arg  # a range() or glob() sweep: no strings of its own to hide
    return f"{key}={','.join(_render(e, named, secrets) for e in elements)}"


def _renderable(element: Any) -> bool:
    from hydra.core.override_parser.types import QuotedString

    if isinstance(element, (list, tuple)):
        return all(_renderable(e) for e in element)
    if isinstance(element, dict):
        return all(_renderable(v) for v in element.values())
    return element is None or isinstance(element, (str, int, float, QuotedString))


def _render(element: Any, named: bool, secrets: list[str]) -> str:
    """``element`` (a value of a parsed override: a string, a quoted string, a number, a
    list or a mapping of them) in Hydra's override grammar, each string holding a secret
    (each value when ``named``) replaced by ``${oc.env:EVALKIT_SECRET_OVERRIDE_<n>}``."""
    from hydra.core.override_parser.types import Override, QuotedString

    if isinstance(element, (list, tuple)):
        return "[" + ",".join(_render(e, named, secrets) for e in element) + "]"
    if isinstance(element, dict):
        return "{" + ",".join(f"{Override._get_value_element_as_str(k)}:"
                              f"{_render(v, named, secrets)}" for k, v in element.items()) + "}"
    if element is None:
        return "null"
    if isinstance(element, QuotedString):
        element = element.text
    if not isinstance(element, str):
        if not named:
            return Override._get_value_element_as_str(element)
        element = str(element)  # a number under a secret name: hidden too
    if element.startswith("${") or not (named or mask(element, secrets) != element):
        return element if element.startswith("${") else \
            Override._get_value_element_as_str(element)
    n = sum(1 for k in os.environ if k.startswith(OVERRIDE_ENV))
    os.environ[f"{OVERRIDE_ENV}{n}"] = element
    return f"${{oc.env:{OVERRIDE_ENV}{n}}}"
