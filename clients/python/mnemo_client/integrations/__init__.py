"""Adapters that plug mnemo into agent frameworks.

- :mod:`mnemo_client.integrations.openai_agents`: ``MnemoSession``, a
  session for the OpenAI Agents SDK (``pip install mnemo-client[openai-agents]``).
- :mod:`mnemo_client.integrations.langgraph`: ``MnemoStore``, a LangGraph
  ``BaseStore`` over mnemo's facts and search (``pip install mnemo-client[langgraph]``).

Each module imports its framework only when it is imported itself.
"""

from __future__ import annotations

from typing import Any

from ..client import MnemoClient


def connect(client: MnemoClient | None, address: str, **tls_and_key: Any) -> MnemoClient:
    """`client` when given, else a new client for `address` (``api_key``, ``tls``,
    ``root_certificates``, ``client_cert``, ``client_key`` as for ``MnemoClient``)."""
    return client or MnemoClient(address, **tls_and_key)
