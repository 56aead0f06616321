"""xfer-electra: ELECTRA, Electric and MLM pre-training, FLOP accounting and PLL scoring (see README.md)."""
