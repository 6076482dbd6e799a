"""The layers a cell benchmarks: torchao's microbenchmark model types, built by torchao itself.

Names are checked without torch; the models come from `torchao.testing.model_architectures`
so results compare with torchao's own runs.
"""

from __future__ import annotations

from typing import Any

ACTIVATIONS = ("relu", "sigmoid", "leakyrelu", "relu6", "gelu", "silu", "hardswish")
MODEL_TYPES = ("linear", "ln_linear", *(f"ln_linear_{a}" for a in ACTIVATIONS), "transformer_block")
# torchao's transformer block: k is the hidden size, input (m, 16, k), 8 heads, MLP ratio 4.
BLOCK_SEQ_LEN = 16
BLOCK_MLP_RATIO = 4


def check_model_type(name: str) -> None:
    if name not in MODEL_TYPES:
        raise ValueError(f"unknown model type {name!r}; known: {', '.join(MODEL_TYPES)}")


def build(model_type: str, m: int, k: int, n: int, dtype: Any, device: str) -> tuple[Any, Any]:
    """(model, input) in eval mode; seed torch first for a reproducible pair."""
    from torchao.testing import model_architectures  # torchao: at run time

    check_model_type(model_type)
    model, data = model_architectures.create_model_and_input_data(
        model_type, m, k, n, high_precision_dtype=dtype, device=device
    )
    return model.eval(), data


def flops(model_type: str, m: int, k: int, n: int) -> int:
    """Floating-point operations of one forward pass (matmuls only; norms are noise)."""
    if model_type == "transformer_block":
        tokens = m * BLOCK_SEQ_LEN
        projections = 2 * tokens * k * (3 * k + k + 2 * BLOCK_MLP_RATIO * k)
        attention = 2 * 2 * m * BLOCK_SEQ_LEN * BLOCK_SEQ_LEN * k  # q @ k^T and attn @ v
        return projections + attention
    return 2 * m * k * n


def tensor_bytes(tensor: Any) -> int:
    """Bytes a tensor occupies, looking inside tensor subclasses (quantized weights)."""
    import torch  # torch: model types are checked without it

    if type(tensor) in (torch.Tensor, torch.nn.Parameter):
        return tensor.numel() * tensor.element_size()
    names, _ = tensor.__tensor_flatten__()
    inner = (getattr(tensor, name) for name in names)
    return sum(tensor_bytes(t) for t in inner if isinstance(t, torch.Tensor))


def model_bytes(model: Any) -> int:
    return sum(tensor_bytes(t) for t in [*model.parameters(), *model.buffers()])


def unquantized_linears(model: Any) -> tuple[int, int]:
    """(linear layers whose weight is still a plain tensor, all linear layers).

    torchao leaves a weight as it is when its shape does not suit the recipe (e.g. K not a
    multiple of the int4 group size) instead of raising.
    """
    import torch  # torch: model types are checked without it

    weights = [mod.weight for mod in model.modules() if isinstance(mod, torch.nn.Linear)]
    plain = sum(type(w) in (torch.Tensor, torch.nn.Parameter) for w in weights)
    return plain, len(weights)
