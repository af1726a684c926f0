"""What a session has used of the model, as ``/status`` says it: tokens in and out since the
agent process started, and how full the model's context was at its last call."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.events import Usage

__all__ = ["SessionUsage"]


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    context_tokens: int | None = None
    context_window: int | None = None
    reported: bool = False

    def add(self, usage: Usage) -> SessionUsage:
        cost = self.cost_usd
        if usage.cost_usd is not None:
            cost = (cost or 0.0) + usage.cost_usd
        return SessionUsage(
            input_tokens=self.input_tokens + usage.input_tokens,
            output_tokens=self.output_tokens + usage.output_tokens,
            cost_usd=cost,
            context_tokens=usage.context_tokens
            if usage.context_tokens is not None
            else self.context_tokens,
            context_window=usage.context_window or self.context_window,
            reported=True,
        )

    def describe(self) -> str:
        """``Tokens: 1,200 in, 300 out · context 1,500 of 258,400 (1% used)``."""
        if not self.reported:
            return "Tokens: none reported yet"
        text = f"Tokens: {self.input_tokens:,} in, {self.output_tokens:,} out"
        if self.context_tokens is not None and self.context_window:
            share = 100 * self.context_tokens / self.context_window
            text += (
                f" · context {self.context_tokens:,} of {self.context_window:,} ({share:.0f}% used)"
            )
        elif self.context_tokens is not None:
            text += f" · context {self.context_tokens:,}"
        if self.cost_usd is not None:
            text += f" · ${self.cost_usd:.4f}"
        return text
