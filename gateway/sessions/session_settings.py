"""``/model`` and ``/mode``: what a person sets for a session (issue 31); the decisions are
pure functions (here and in :mod:`gateway.sessions.permission_modes`), the desk acts.

The project's ``models = [...]`` is the whole list a person may pick from. Without it,
``/model`` says which model runs and changes nothing: a person in a chat never names a model
the operator did not list. The choice is kept in the ledger (``store.settings``), so it
holds on any host and after a restart; the runner reads it when it starts each turn, so it
applies from the next turn and never to the one running.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gateway.config.model import ProjectConfig
from gateway.domain import Actor, InteractionOrigin, InteractionState
from gateway.interactions.setting_change import change_of, setting_request
from gateway.session_record import SessionRecord
from gateway.sessions.broker import Broker
from gateway.sessions.permission_modes import choose_mode, mode_line
from gateway.sessions.runner import SessionRunner
from gateway.store.store import Store

__all__ = ["ModelChoice", "SettingsDesk", "choose_model", "model_line", "offers"]

# a name is echoed back only this long: what was typed may be anything
_ECHO_MAX = 64


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelChoice:
    """What ``/model ARGS`` comes to: the model to record (None: nothing changes) and what
    the person is told."""

    text: str
    chosen: str | None = None


def model_line(project: ProjectConfig, chosen: str | None) -> str:
    """The model a session's next turn runs, in a person's words (``/model``, ``/status``)."""
    if chosen is not None:
        return f"Model: {chosen} (chosen with /model)"
    configured = project.agent_options.model
    if configured is not None:
        return f"Model: {configured} (the project's)"
    return "Model: the agent's own default"


def offers(offered: Sequence[str] | None, name: str) -> bool:
    """Whether the agent offers ``name``: it said which models it offers and ``name`` is one
    (any case), or it never said (then the project's list is trusted)."""
    return offered is None or name.casefold() in {model.casefold() for model in offered}


def choose_model(
    project: ProjectConfig,
    chosen: str | None,
    args: str,
    *,
    offered: Sequence[str] | None = None,
) -> ModelChoice:
    """Pure: what ``/model ARGS`` does in a session of ``project`` whose choice so far is
    ``chosen``, where the agent offers ``offered`` (None: it did not say). A name outside
    the project's ``models``, or one the agent does not offer, changes nothing and says why."""
    models = project.agent_options.models
    now = model_line(project, chosen)
    wanted = args.strip()
    if not models:
        told = "This project lists no models to choose from (models in its config)"
        return ModelChoice(text=f"{now}\n{told}: nothing changes.")
    agent = project.agent.value
    listing = "\n".join(
        f"  · /model {name}" + ("" if offers(offered, name) else f" (not offered by {agent})")
        for name in models
    )
    if not wanted:
        return ModelChoice(text=f"{now}\nChoose one of:\n{listing}")
    match = next((name for name in models if name.casefold() == wanted.casefold()), None)
    if match is None:
        shown = wanted if len(wanted) <= _ECHO_MAX else wanted[:_ECHO_MAX] + "…"
        shown = "".join(c if c.isprintable() else "?" for c in shown)
        return ModelChoice(
            text=f"“{shown}” is not one of this project's models; nothing changed. "
            f"Choose one of:\n{listing}"
        )
    if not offers(offered, match):
        return ModelChoice(
            text=f"{agent} does not offer {match} (it said which models it offers as it "
            f"started); nothing changed. {now}."
        )
    if match == (chosen or project.agent_options.model):
        return ModelChoice(text=f"{now}: nothing to change.")
    return ModelChoice(text=f"Model: {match}, from the next turn.", chosen=match)


class SettingsDesk:
    """Carries out ``/model`` and ``/mode`` for a session: the ledger's record (or, for a
    looser mode, an approver's request), then the answer."""

    def __init__(
        self,
        projects: dict[str, ProjectConfig],
        store: Store,
        broker: Broker,
        runner_of: Callable[[str], SessionRunner | None],
    ) -> None:
        self._projects = projects
        self._store = store
        self._broker = broker
        self._runner_of = runner_of

    async def describe_model(self, session: SessionRecord) -> str | None:
        """The model line of ``/status`` where the gateway knows the model (chosen, or in the
        project's config) or offers a choice; None where only the agent knows it."""
        project = self._projects[session.project]
        chosen = await self._store.settings.model(session.id)
        options = project.agent_options
        if chosen is None and options.model is None and not options.models:
            return None
        return model_line(project, chosen)

    def agent_modes(self, session: SessionRecord) -> tuple[tuple[str, ...] | None, str | None]:
        """The modes the session's agent said it offers (None: not listed) and the one it
        runs in, where this host runs it and the agent said (ACP agents, OpenCode)."""
        runner = self._runner_of(session.id)
        if runner is None:
            return None, None
        return runner.modes_offered, runner.mode_now

    async def describe_mode(self, session: SessionRecord) -> str | None:
        """The mode line of ``/status`` where the project offers modes."""
        project = self._projects[session.project]
        if not project.agent_options.allowed_modes:
            return None
        _, agent_mode = self.agent_modes(session)
        chosen = await self._store.settings.of(session.id)
        return mode_line(project, chosen, agent_mode=agent_mode)

    async def mode(self, session: SessionRecord, args: str, actor: Actor) -> str:
        """``/mode ARGS`` by ``actor``: a tightening is recorded (and audited) and applies
        from the next turn; a loosening is never done by text."""
        chosen = await self._store.settings.of(session.id)
        offered, agent_mode = self.agent_modes(session)
        choice = choose_mode(
            self._projects[session.project],
            chosen,
            args,
            agent_modes=offered,
            agent_mode=agent_mode,
        )
        if choice.setting is None or choice.value is None:
            return choice.text
        if choice.loosens:
            return await self._ask_to_loosen(
                session, choice.setting, choice.value, choice.before, actor
            )
        before = getattr(chosen, choice.setting)
        await self._store.settings.choose(session.id, choice.setting, choice.value)
        await self._store.audit.record(
            "session.mode",
            actor=actor.key(),
            session_id=session.id,
            details={"setting": choice.setting, "value": choice.value, "before": before},
        )
        return choice.text

    def offered_models(self, session: SessionRecord) -> tuple[str, ...] | None:
        """The models the session's agent said it offers, where this host runs it and the
        agent said (None: unknown, the project's list is trusted)."""
        runner = self._runner_of(session.id)
        return runner.models_offered if runner is not None else None

    async def model_now(self, session: SessionRecord) -> str | None:
        """The model the session's next turn asks for (chosen, else the project's)."""
        chosen = await self._store.settings.model(session.id)
        return chosen or self._projects[session.project].agent_options.model

    async def choose_model(self, session: SessionRecord, args: str, actor: Actor) -> ModelChoice:
        """``/model ARGS`` (typed, or a button of its list) by ``actor``: the choice,
        recorded and audited where it changes the model."""
        chosen = await self._store.settings.model(session.id)
        project = self._projects[session.project]
        choice = choose_model(project, chosen, args, offered=self.offered_models(session))
        if choice.chosen is not None:
            await self._store.settings.set_model(session.id, choice.chosen)
            await self._store.audit.record(
                "session.model",
                actor=actor.key(),
                session_id=session.id,
                details={"model": choice.chosen, "before": chosen},
            )
        return choice

    async def _ask_to_loosen(
        self, session: SessionRecord, setting: str, value: str, now: str, actor: Actor
    ) -> str:
        """A looser mode is a card an approver of the project accepts or refuses (its
        origin: a setting change); nothing changes until then. ``now``: the value in force."""
        for waiting in await self._store.interactions.list_open(session.id):
            change = change_of(waiting)
            if (
                change is not None
                and waiting.state is InteractionState.PENDING
                and (change.setting, change.value) == (setting, value)
            ):
                return f"Already asked: request {waiting.id} waits for an approver."
        if session.current_epoch == 0:
            return "The agent has not started in this session yet: send it a message first."
        request = setting_request(setting, value, now=now, asker=str(actor))
        asked = await self._broker.open(session.id, session.current_epoch, request, turn_id=None)
        assert asked.origin is InteractionOrigin.SETTING
        runner = self._runner_of(session.id)
        if runner is not None:  # its expiry is watched from now (or from the agent's start)
            runner.request_opened()
        await self._store.audit.record(
            "session.mode_asked",
            actor=actor.key(),
            session_id=session.id,
            interaction_id=asked.id,
            details={"setting": setting, "value": value, "before": now},
        )
        return (
            f"Loosening the {setting.replace('_', ' ')} from {now} to {value} needs an approver "
            f"of this project: request {asked.id} waits for one. Nothing changes until then."
        )
