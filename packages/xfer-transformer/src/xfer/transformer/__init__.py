"""xfer Transformer: BERT/ELECTRA-architecture encoder, task heads and checkpoint interop.

Modules, model first:

- `encoder`   the network top to bottom (config, embeddings, layer, encoder, init)
- `kernels`   its speed tricks: cheap CPU dropout, the attention plan (unpadding, length
              buckets), bucketed attention with a hand-written CPU backward, SDPA elsewhere
- `presets`   named encoder sizes, ELECTRA's generator sizing
- `heads`     task heads (sequence, token, span QA) and QA losses/decoding
- `registry`  the open head registry: heads are model components registered via `xfer_models`
- `hfmap`     how a head maps to a HF `transformers` class (`HFHeadMap`)
- `modelio`   xfer model directories (xfer_model.json + safetensors)
- `hf`        HF checkpoint import/export (encoder weights + registered heads' maps)
- `objectives`, `finetune`, `finetune_config`   the `transformer.finetune` stage
- `plugin`    registration only
"""
