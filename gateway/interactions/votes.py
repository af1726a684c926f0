"""The policy in force for a request, as the desk and the runner need it (issue 17).

:class:`PolicyBook` is built once from the config: which rule governs a request of a
project, what it requires, whether an actor is one of its approvers (counted as people,
through ``[people]``), and the refusal a ``action = "deny"`` rule sends at once. Pure.
"""

from __future__ import annotations

from collections import OrderedDict

from gateway.config.model import Config
from gateway.config.people import People
from gateway.config.policy_rules import PolicyRule
from gateway.domain import Actor, ConversationRef, Decision, Effect
from gateway.interactions.machine import Interaction
from gateway.interactions.policy import Requirement, governing_rule, requirement

__all__ = ["POLICY_ACTOR", "PolicyBook", "refusal", "surface_of"]

# who "decided" a request a rule refused at once: no person, and said so on the card
POLICY_ACTOR = Actor(platform="policy", user_id="rule", display="a policy rule")


# rules and requirements remembered per interaction: a request's rule never changes (its
# kind and detail are stored once, the config is the process's); the runner walks the rules
# when the request opens, a click asks again (twice), the expiry task at every look
REMEMBERED = 4096


class PolicyBook:
    def __init__(self, config: Config) -> None:
        self._config = config
        self.people = People(config.people)
        self._known: OrderedDict[tuple[str, str], Requirement] = OrderedDict()
        self._rules: OrderedDict[tuple[str, str], PolicyRule | None] = OrderedDict()

    def rule(self, project: str, interaction: Interaction) -> PolicyRule | None:
        """The rule that governs ``interaction`` (first match wins), walked once."""
        settings = self._config.projects.get(project)
        if settings is None or not settings.policy:
            return None
        key = (project, interaction.id)
        if key in self._rules:
            return self._rules[key]
        found = self._rules[key] = governing_rule(settings.policy, interaction)
        if len(self._rules) > REMEMBERED:
            self._rules.popitem(last=False)
        return found

    def requirement(self, project: str, interaction: Interaction) -> Requirement:
        settings = self._config.projects.get(project)
        if settings is None or not settings.policy:
            return Requirement()
        key = (project, interaction.id)
        known = self._known.get(key)
        if known is None:
            rule = self.rule(project, interaction)
            known = requirement(rule, interaction, self._config.groups, self.people)
            self._known[key] = known
            if len(self._known) > REMEMBERED:
                self._known.popitem(last=False)
        return known

    def reload(self, config: Config) -> None:
        """A reloaded config's rules and people for the requests opened from now on; a
        request already seen keeps the requirement it opened with (remembered above)."""
        self._config = config
        self.people = People(config.people)

    def person(self, actor: Actor) -> str:
        return self.people.of(actor)

    def approves(self, requirement: Requirement, actor: Actor) -> bool | None:
        """Is ``actor`` one of the rule's approvers? None: the rule names none (the
        project's approvers decide)."""
        if requirement.approvers is None:
            return None
        return self.person(actor) in requirement.approvers


def refusal(interaction: Interaction, message: str) -> Decision | None:
    """The decision an ``action = "deny"`` rule sends: the request's plain deny (else its
    deny-and-stop), with the rule's message. None where the request offers no refusal."""
    for effect in (Effect.DENY, Effect.CANCEL):
        for action in interaction.actions:
            if action.effect is effect:
                return Decision(action_id=action.id, message=message)
    return None


def surface_of(conversation: ConversationRef) -> str:
    """The card copy a vote was cast on, as the votes table records it."""
    parts = (conversation.platform, conversation.space, conversation.channel, conversation.thread)
    return ":".join(part or "-" for part in parts)
