"""Export to Hugging Face `transformers` (Llama, Qwen3, GPT-2 classes) and import back, exactly or not at all."""
