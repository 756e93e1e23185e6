"""Where a lab node's commands run: a network namespace here, or a device over SSH."""
