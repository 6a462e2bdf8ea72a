"""The model engine: a Llama-family decoder that reads and writes the paged KV cache.

    config          ModelConfig: sizes, presets, Hugging Face config.json import
    llama           Llama: flat-batch forward through the paged cache; full-recompute reference
    rope, linear    RoPE tables; linear layers in the fastest weight layout for the device
    gguf_loader     GGUF files (dequantized, Q/K rows un-permuted); hf_loader: safetensors folders
    tokenizer       byte-level BPE (`tokenizers`), ChatML chat template
    registry        load_model("smollm2-135m" | "tiny" | PATH) -> (model, tokenizer)
    cache           the app-wide model cache: load_lab_model("auto" | name | PATH), kept per
                    device, dtype and kernel path, shared by every lab
    runner          ModelRunner: many sequences, one flat batch per step, BlockManager + cache
    sampler, generate   greedy / temperature + top-p; generation with or without the cache
    perplexity      perplexity on a text (the passage in assets/text)
    tiny            a seeded random tiny model for tests
    bench           our decode tokens/s against transformers' generate
"""
