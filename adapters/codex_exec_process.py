"""The process side of ``codex exec``: its command line, its stdin, its stderr's policy record.

:class:`adapters.codex_exec.CodexExecCodec` reads stdout; this module holds the rest of what
one turn's process needs, all pure: the argv (:func:`exec_argv`), the prompt as stdin lines
(:func:`prompt_lines`), and the refusals that 0.171 records only in the tracing log on stderr
(:func:`warnings_from_stderr`; the codec's docstring says why stderr). Observed behaviour:
``tests/transcripts/codex-exec-0.171/``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from adapters.codex_launch import ConfigValue, quieted, toml_value
from gateway.errors import CodecUsageError, ConfigError
from gateway.events import Warning

__all__ = [
    "DENIED_BY_POLICY",
    "NO_QUESTIONS",
    "OFFER_WIDER_PERMISSIONS",
    "RUST_LOG",
    "CodexExecSettings",
    "exec_argv",
    "prompt_lines",
    "warnings_from_stderr",
]

DENIED_BY_POLICY: Final = "denied_by_policy"

# What the stderr tracing log must contain for warnings_from_stderr(): errors everywhere, and the
# sandbox's violation records (WARN). Set by the session, whatever the project's env says.
RUST_LOG: Final = "error,codex_sandboxing=warn"

OFFER_WIDER_PERMISSIONS = (
    "codex exec cannot ask for approval. To allow it, send the prompt again with the Codex "
    "app-server backend (which asks you first) or with a wider sandbox."
)
_THREAD_ID = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_-]*$")
_FEATURE = re.compile(r"^[a-z0-9_]+$")
_CONFIG_KEY = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
# tracing's default format: "<RFC 3339 time> <LEVEL> <target>: <message> <field=value ...>"
_TRACE_RECORD = re.compile(r"^\S+\s+(?P<level>[A-Z]+)\s+(?P<target>[\w:]+):\s*(?P<body>.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_REJECTED = re.compile(r"\breject(?:ed)?\b", re.IGNORECASE)
_FIELD = re.compile(r"(\w+)=(\S+)")
_DEBUG_REJECTED = re.compile(r'Rejected\(\\"(?P<why>.*?)\\"\)')
_REASON_LIMIT = 400
_QUESTION = "request_user_input is not supported in exec mode"
NO_QUESTIONS = (
    "but codex exec cannot take an answer: it went on without one. The Codex app-server "
    "backend asks you."
)


# --- the command line --------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class CodexExecSettings:
    """How every turn's ``codex exec`` is started. ``command`` is the binary or argv prefix."""

    command: Sequence[str]
    cwd: str
    sandbox: str = "workspace-write"
    model: str | None = None
    skip_git_repo_check: bool = False  # codex refuses to run outside a git repo without it
    enable: Sequence[str] = ()
    config: Mapping[str, ConfigValue] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.command, str) or not self.command:
            raise ConfigError("the codex command must be a non-empty list of arguments")
        for feature in self.enable:
            if not _FEATURE.fullmatch(feature):
                raise ConfigError(f"not a codex feature name: {feature!r}")
        for key in self.config or {}:
            if not _CONFIG_KEY.fullmatch(key):
                raise ConfigError(f"not a codex config key: {key!r}")


def exec_argv(
    settings: CodexExecSettings,
    *,
    resume_thread_id: str | None = None,
    images: Sequence[str] = (),
) -> list[str]:
    """``codex exec --json [options] -`` or ``codex exec --json [options] resume <id> -``.

    ``images``: pictures sent in chat (issue 32), each ``--image=PATH`` right before ``-``
    (exec and ``exec resume`` both take it: "image(s) to attach to the prompt"); the model
    receives each as an ``input_image`` (FACTS-session-features.md).

    Options go before ``resume`` (``codex exec resume --help`` has no --cd/--sandbox/--color;
    exec's own options before the subcommand apply to it). ``-`` makes exec read the prompt
    from stdin until EOF. Values are attached with ``=`` so that none is read as an option.
    Enabled features come with Codex's warning about them silenced (codex_launch.quieted).
    """
    argv = [*settings.command, "exec", "--json", "--color=never", f"--cd={settings.cwd}"]
    argv.append(f"--sandbox={settings.sandbox}")
    if settings.model is not None:
        argv.append(f"--model={settings.model}")
    if settings.skip_git_repo_check:
        argv.append("--skip-git-repo-check")
    argv += [f"--enable={feature}" for feature in settings.enable]
    for key, value in quieted(settings.enable, settings.config).items():
        argv += ["-c", f"{key}={toml_value(value)}"]
    if resume_thread_id is not None:
        if not _THREAD_ID.fullmatch(resume_thread_id):
            raise CodecUsageError(f"not a codex thread id: {resume_thread_id!r}")
        argv += ["resume", resume_thread_id]
    for path in images:
        if "," in path:  # --image splits its value at commas (the capabilities say no pictures)
            raise CodecUsageError(
                f"codex exec cannot take a picture whose path has a comma: {path}"
            )
        argv.append(f"--image={path}")
    argv.append("-")
    return argv


def prompt_lines(text: str) -> list[bytes]:
    """The prompt as lines for stdin (the process writes each with a newline, then EOF).

    A prompt that ends with a newline arrives unchanged; any other gets one trailing newline,
    which codex keeps (it does not trim stdin). An empty prompt is no line at all: codex then
    ends the turn with "No prompt provided via stdin".
    """
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.encode() for line in lines]


# --- policy refusals on stderr -----------------------------------------------------------


def warnings_from_stderr(stderr: str) -> list[Warning]:
    """``Warning(code="denied_by_policy")`` for each refusal the tracing log on stderr records.

    The records (0.171, the pinned binary; no structured field on stdout says it):
    ``ERROR codex_core::tools::router: error=<reason>`` is a tool call codex refused to run;
    it is a refusal by policy when the reason says rejected ("reject command", "Rejected(...)",
    "patch rejected"), and otherwise a malformed call the model is told about (not reported).
    ``WARN codex_sandboxing::violation: recorded sandbox violation: resource=R reason=X``
    is a command the sandbox stopped. Repeats are reported once, with a count. And
    ``ERROR codex_app_server::bespoke_event_handling: ... request_user_input is not supported
    in exec mode`` is a question of the agent that exec answered empty by itself
    (``Warning(code="question_unsupported")``).
    """
    texts: Counter[str] = Counter()
    questions = 0
    for raw in stderr.splitlines():
        record = _TRACE_RECORD.match(_ANSI.sub("", raw).strip())
        if record is None:
            continue
        level, target, body = record["level"], record["target"], record["body"]
        if target == "codex_core::tools::router" and level == "ERROR":
            reason = body.removeprefix("error=").strip()
            if _REJECTED.search(reason):
                texts[_refused_call_text(reason)] += 1
        elif target == "codex_sandboxing::violation" and "sandbox violation" in body:
            texts[_sandbox_violation_text(dict(_FIELD.findall(body)))] += 1
        elif target == "codex_app_server::bespoke_event_handling" and _QUESTION in body:
            questions += 1
    warnings = [
        Warning(message=f"Denied by policy{_times(n)}: {text}", code=DENIED_BY_POLICY)
        for text, n in texts.items()
    ]
    if questions:
        text = f"The agent asked you a question{_times(questions)}, {NO_QUESTIONS}"
        warnings.append(Warning(message=text, code="question_unsupported"))
    return warnings


def _times(count: int) -> str:
    return f" ({count} times)" if count > 1 else ""


def _refused_call_text(reason: str) -> str:
    # execpolicy refusals come Debug-formatted: CreateProcess { message: "Rejected(\"why\")" }
    inner = _DEBUG_REJECTED.search(reason)
    reason = inner["why"].replace('\\"', '"') if inner else reason
    if len(reason) > _REASON_LIMIT:
        reason = reason[: _REASON_LIMIT - 1] + "…"
    if "patch" in reason.lower():
        what, effect = "a file change", "nothing was written"
    else:
        what, effect = "a command", "it was not run"
    return f"codex refused {what} ({reason}); {effect}. {OFFER_WIDER_PERMISSIONS}"


def _sandbox_violation_text(fields: Mapping[str, str]) -> str:
    resource = fields.get("resource", "a resource").replace("_", " ")
    reason = fields.get("reason", "no reason given").replace("_", " ")
    return (
        f"the sandbox stopped a command's {resource} access ({reason}); "
        f"the command failed and was not retried outside the sandbox. {OFFER_WIDER_PERMISSIONS}"
    )
