"""Adapters that plug mnemo into agent frameworks.

- :mod:`mnemo_client.integrations.openai_agents`: ``MnemoSession``, a
  session for the OpenAI Agents SDK (``pip install mnemo-client[openai-agents]``).
- :mod:`mnemo_client.integrations.langgraph`: ``MnemoStore``, a LangGraph
  ``BaseStore`` over mnemo's facts and search (``pip install mnemo-client[langgraph]``).

Each module imports its framework only when it is imported itself.
"""
