"""Which platform accounts are one person (``[people.NAME] = ["slack:U1", "telegram:42"]``).

Votes count per person (issue 17): one person with two accounts cannot satisfy a 2-of-N rule
alone. An account no ``[people]`` entry names is a person of its own, called by its
platform-qualified id. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gateway.domain import Actor

__all__ = ["People"]


class People:
    def __init__(self, people: Mapping[str, Sequence[str]]) -> None:
        self._names = frozenset(people)
        self._person_of: dict[str, str] = {}
        for name, accounts in people.items():
            for account in accounts:
                self._person_of[account] = name

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def person(self, account: str) -> str:
        """The person an account (``"slack:U1"``) belongs to: their name, or the account."""
        return self._person_of.get(account, account)

    def of(self, actor: Actor) -> str:
        return self.person(actor.key())

    def owner_of(self, account: str) -> str | None:
        """The ``[people]`` name that lists ``account``, or None."""
        return self._person_of.get(account)
