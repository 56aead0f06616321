"""xfer-example: how a third party extends xfer with a task and an objective (see README.md)."""
