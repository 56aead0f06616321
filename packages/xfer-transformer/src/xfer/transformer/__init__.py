"""xfer Transformer: BERT/ELECTRA-architecture encoder, task heads and checkpoint interop."""
