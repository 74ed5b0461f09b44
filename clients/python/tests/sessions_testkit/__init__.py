"""Test helpers: the service's binary as a subprocess, a fake LLM, scratch Postgres databases.

Shared by the unit, live and end-to-end tests, by the Agents SDK suite plugin and by
``bench/python_client.py``; nothing here is part of the installed package.
"""
