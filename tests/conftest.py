"""Rules for the whole suite. Fixtures live next to the tests that use them
(tests/lab, tests/store, tests/web); shared helpers are in tests/helpers."""

# HOPLAB_REQUIRE_ALL=1 turns a skip into a failure (make test as root, CI).
pytest_plugins = ["tests.helpers.require_all"]
