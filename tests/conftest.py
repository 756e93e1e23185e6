"""Rules for the whole suite. Fixtures live next to the tests that use them
(tests/lab, tests/store, tests/web); shared helpers are in tests/helpers."""

# HOPLAB_REQUIRE_ALL=1 turns a skip into a failure (make test as root, CI); a test that
# leaves a process running fails (tests/helpers/reaping.py); a test that failed while the
# hypervisor took this machine's CPU runs again, and says so (tests/helpers/steal.py).
# The pool deals its files longest first (tests/helpers/order.py).
pytest_plugins = ["tests.helpers.require_all", "tests.helpers.reaping", "tests.helpers.alone",
                  "tests.helpers.workers", "tests.helpers.steal", "tests.helpers.order"]

# The suite is a front end, as the command line is: it gives the kind registry the
# loader of the built-in test kinds (hoplab.kinds), which the lower layers' tests ask.
import hoplab.kinds  # noqa: E402, F401
