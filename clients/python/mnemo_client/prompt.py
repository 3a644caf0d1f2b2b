"""A context bundle at the head of a model's prompt, where a prompt cache reuses it.

Providers cache the longest prompt prefix they saw recently and bill it at a
fraction of the input price. A bundle's text runs from the most stable to the
most volatile (``ContextBundle.parts()``): the header, the subject's memory and
the summary first (unchanged until the session is folded), then the turns since
the fold (append-only), then what the request decides. Put it first, before
anything that changes per call, and successive bundles of a session share their
beginning.

- Providers with automatic prefix caching (OpenAI, DeepSeek, Gemini's implicit
  cache, ...) need nothing more than :func:`system_message` as the first message.
- Providers with explicit breakpoints (Anthropic's ``cache_control``) get them
  where part 1 and part 2 end from :func:`anthropic_system`.

    bundle = mnemo.get_context_bundle("support", "case-42", 4000)
    client.messages.create(model=..., system=anthropic_system(bundle), messages=...)
"""

from __future__ import annotations

from typing import Any

from .models import ContextBundle

__all__ = ["anthropic_system", "system_message", "text_blocks"]


def text_blocks(bundle: ContextBundle, *, cache_control: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The bundle as text content blocks, a cache breakpoint closing each of its first two parts.

    ``cache_control`` is the breakpoint's value (default ``{"type": "ephemeral"}``). Empty parts
    are left out; the blocks' texts joined are exactly ``bundle.rendered_text``.
    """
    mark = cache_control if cache_control is not None else {"type": "ephemeral"}
    stable, log, request = bundle.parts()
    blocks: list[dict[str, Any]] = []
    for text, cached in ((stable, True), (log, True), (request, False)):
        if not text:
            continue
        block: dict[str, Any] = {"type": "text", "text": text}
        if cached:
            block["cache_control"] = dict(mark)
        blocks.append(block)
    return blocks


def anthropic_system(bundle: ContextBundle, *, cache_control: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """An Anthropic Messages ``system`` value: the bundle with breakpoints after parts 1 and 2.

    Anthropic allows four breakpoints per request; this uses two. A part shorter than the
    model's minimum cacheable length is simply not cached.
    """
    return text_blocks(bundle, cache_control=cache_control)


def system_message(bundle: ContextBundle, *, role: str = "system") -> dict[str, Any]:
    """A chat message holding the bundle, to put first (automatic prefix caching)."""
    return {"role": role, "content": bundle.rendered_text}
