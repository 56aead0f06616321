"""GLUE benchmark tasks and a generic TSV task for xfer.

Importing this package is cheap: the task classes live in `xfer.tasks.glue.tasks` and are
imported only when a recipe uses one of them.
"""
