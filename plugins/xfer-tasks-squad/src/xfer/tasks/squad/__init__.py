"""SQuAD 1.1 / 2.0 extractive question answering tasks for xfer.

Importing this package is cheap; task classes live in `xfer.tasks.squad.tasks`.
"""
