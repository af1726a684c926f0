"""What /status says of a session's usage: tokens in and out added up, the context as last
reported."""

from __future__ import annotations

from gateway.events import Usage
from gateway.sessions.usage import SessionUsage


def test_nothing_reported_is_said_plainly() -> None:
    assert SessionUsage().describe() == "Tokens: none reported yet"


def test_tokens_add_up_and_the_context_is_the_last_reported() -> None:
    usage = SessionUsage().add(
        Usage(input_tokens=1000, output_tokens=200, context_tokens=1200, context_window=10_000)
    )
    usage = usage.add(Usage(input_tokens=1500, output_tokens=300, context_tokens=2500))
    assert usage.describe() == ("Tokens: 2,500 in, 500 out · context 2,500 of 10,000 (25% used)")


def test_a_cost_where_the_agent_reports_one() -> None:
    usage = SessionUsage().add(Usage(input_tokens=10, output_tokens=5, cost_usd=0.0125))
    assert usage.describe() == "Tokens: 10 in, 5 out · $0.0125"
