"""Sequence-tagging tasks for xfer: chunking, NER, POS tagging and generic column files.

Importing this package is cheap; task classes live in `xfer.tasks.conll.tasks`.
"""
