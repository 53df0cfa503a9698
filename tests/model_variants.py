"""The model variants the model tests run over: every switch that changes how a forward pass computes."""

VARIANTS = {
    "rope": {},
    "learned": {"position": "learned"},
    "none": {"position": "none"},
    "sinusoidal": {"position": "sinusoidal"},
    "alibi": {"position": "alibi"},
    "alibi_gqa_6_heads": {"position": "alibi", "n_heads": 6, "head_dim": 8, "n_kv_heads": 2},  # slopes interpolated
    "gqa": {"n_kv_heads": 2},
    "mqa": {"n_kv_heads": 1},
    "moe": {"mlp": "moe", "n_experts": 4, "top_k": 2},
    "postnorm": {"prenorm": False},
    "no_residual": {"residual": False},
    "postnorm_no_residual": {"prenorm": False, "residual": False},
    "qk_norm": {"qk_norm": True},
    "head_dim": {"head_dim": 12, "n_kv_heads": 2},
    "gpt2_style": {"position": "learned", "norm": "layernorm", "mlp": "gelu", "bias": True, "tie_embeddings": False},
}
