"""What the demo agent says: the menu and the long answer (fixed text, so tests can compare)."""

from __future__ import annotations

__all__ = ["LONG_ANSWER", "MENU", "SLOW_INTRO"]

MENU = """\
Hi! I am the agent-gateway demo agent. I speak the Codex app-server protocol, so what you \
see here goes through the same gateway code as a real Codex, with no account and no API key.

Type one of these words (or its number):

1. **command**: I ask to run `{command}` in my work dir; allow it and I run it.
2. **patch**: I propose a diff to `greeting.py` and apply it if you allow it.
3. **form**: I ask three questions: one takes your own words, one is a secret.
4. **long**: a long markdown answer with code, streamed and split into several messages.
5. **stop**: a slow answer; send /stop while it streams and I stop at once.
6. **crash**: I ask for an approval, then my process dies before you answer.
7. **plan**: I propose a plan; implement it or send it back with what to change.

My work dir is `{cwd}`. Commands for the gateway itself start with a slash: /help, /status.
"""

SLOW_INTRO = (
    "I will count slowly to {count}. Send /stop while I count: the gateway sends "
    "`turn/interrupt` and I stop where I am."
)

_APPROVAL_JSON = """\
{"method": "item/commandExecution/requestApproval", "id": 0, "params": {
  "threadId": "…", "turnId": "…", "itemId": "call_1",
  "command": "/bin/sh -c 'echo hello | tee hello.txt'",
  "availableDecisions": ["accept", {"acceptWithExecpolicyAmendment": …}, "cancel"]}}
{"jsonrpc": "2.0", "id": 0, "result": {"decision": "accept"}}
{"method": "serverRequest/resolved", "params": {"threadId": "…", "requestId": 0}}"""

_SECTIONS = (
    """\
# How an approval travels through agent-gateway

This is the long answer: it streams in small pieces, and it is longer than one chat message \
may be, so the gateway splits it without breaking the code block below. Every part of it \
describes what just happened in this conversation, or what happens when you type **command**.
""",
    """\
## 1. The agent asks

A coding agent that wants to run a command does not print "may I?" and hope someone reads \
it. It sends a structured request on the protocol it speaks. For Codex that is a JSON-RPC \
request from the server to the client, with an id of its own: the first one is 0, the next \
one 1, and so on. The request names the command, the directory, the reason, and exactly the \
decisions the agent will take: allow once, allow with a rule, deny and stop the turn. The \
gateway offers those and nothing else; the milder "deny" is added because Codex 0.171 takes \
it without listing it.
""",
    """\
## 2. The request becomes an interaction

The adapter turns the request into an *interaction*: a row in a SQLite ledger with a short \
id of its own, the agent's request key kept opaque beside it, the session, the turn and the \
runtime epoch (one per agent process). Nothing about it lives only in memory: if the gateway \
stops now, the next start finds the row, sees that the process which asked is gone, and marks \
the interaction *orphaned* instead of pretending that an answer could still reach it.
""",
    """\
## 3. The card

Every conversation that shows the session gets a card: the command in full (or attached as a \
file when it is too long for a message), the reason, and one button for each decision the \
agent offered, labelled with how far it reaches: once, this turn, this session, always. Each \
button carries a signed token: the interaction id, the choice and the epoch, with a short \
HMAC tag, so that a forged or stale click is refused before anything else happens.
""",
    """\
## 4. The decision, and three facts

The first valid click from an authorized person wins, by compare-and-set on the \
interaction's version; a second click is told who decided first. Three facts are recorded \
separately, each with a time and an actor:

- **decided**: who chose what, committed before anything is written to the agent;
- **delivered**: the answer was written to the agent, once, through the request's own id;
- **resolved**: the agent confirmed it (for Codex, `serverRequest/resolved`).

A decision is never guessed, never defaulted and never resent blindly. Chat text is never a \
decision either: "ok" typed while a card waits is a message for the agent, and the gateway \
says that the card still waits.
""",
    """\
## 5. What it looks like on the wire

Here is the round trip of the **command** scenario, one JSON object a line, as the demo agent \
and the gateway exchange it (ids shortened):

```json
"""
    + _APPROVAL_JSON
    + """
```

The same three lines, in the same order, are what a real Codex 0.171 writes: the demo agent \
was written against recordings of the real binary, and the gateway cannot tell them apart.
""",
    """\
## 6. The same flow from Python

The tests drive a whole gateway in one process with the in-memory platform. This is, in \
short, how `tests/test_demo_gateway.py` makes a person ask for the command, waits for the \
card and clicks "Allow once" (a test runs this very code):

```python
import asyncio
from pathlib import Path

from gateway.app.demo.command import build_demo
from gateway.domain import Actor, ConversationRef
from gateway.sessions.engine import Gateway

YOU = Actor(platform="memory", user_id="you")
ROOM = ConversationRef(platform="memory", space="demo", channel="room", thread=None)


async def main() -> None:
    demo = build_demo(Path("demo-data"), headless=True)
    memory = demo.memory
    async with Gateway(demo.config, platforms=demo.platforms, launcher=demo.launcher):
        await memory.say(ROOM, YOU, "command")

        def approval_card():
            for shown in memory.cards(ROOM):
                if shown.card is not None and shown.card.actions:
                    return shown.card
            return None

        card = await memory.wait_for(approval_card)
        allow_once = card.actions[0]
        ack = await memory.click(ROOM, YOU, allow_once.token)
        print(ack.text)  # "Approved: Allow once. ..."

        def done():
            # the command's line turns to "✓ ..." once it has run
            return any("✓" in text and "hello.txt" in text for text in memory.texts(ROOM))

        await memory.wait_for(done)


asyncio.run(main())
```

Nothing in it is mocked: the launcher starts this very agent as a process, the adapter \
reads its JSON lines, and the ledger is a real SQLite file in the data dir.
""",
    """\
## 7. Interrupts and crashes

`/stop` is not a decision and never waits behind a turn: it goes to the agent at once as its \
native interrupt (`turn/interrupt` for Codex). The turn ends *interrupted*, and a request \
the agent withdrew is shown as cancelled by the agent. When an agent process dies, its open \
requests cannot be answered any more: their cards say that the agent process ended before \
anyone answered, their buttons are removed, \
and the next message starts the agent again and resumes the conversation from its thread id. \
No prompt and no decision is replayed on its own.
""",
    """\
## 8. Try it

- **command**: allow once, and `hello.txt` appears in the work dir; choose "Always allow" and \
the next **command** runs without a card.
- **patch**: the card shows the diff; "Allow for this session" applies later changes to the \
same file without asking.
- **form**: answer in the form; the secret answer is only taken in a private form, never \
stored in the ledger in clear, and never repeated back.
- **stop** then /stop, and **crash**, to see the two ways a turn ends early.
""",
)

LONG_ANSWER = "\n".join(_SECTIONS)
