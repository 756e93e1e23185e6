"""Helpers shared by the test modules, imported as ``tests.helpers.<module>``:

- ``runs``: RunRecords with chosen figures (compare, select and trend tests);
- ``lab``: real labs in network namespaces, the CLI as a user runs it, leftover checks;
- ``web``: constructed rrul runs and a ``hoplab serve`` process for the dashboard tests.

Fixtures stay in the conftest.py of the directory that uses them.
"""
