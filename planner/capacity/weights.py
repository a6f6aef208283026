"""The ``weights`` module counts a decoder's parameters and the bytes its checkpoint holds.

Used when no ``model.safetensors.index.json`` is at hand: the GPU-memory
estimate of the KV cache needs the weights' size, and the parameter count
of a standard decoder follows from its ``config.json``. The count is exact
for the layouts it covers (Llama, Mistral, Qwen2, Qwen3 and their MoE
variants: it gives 8,030,261,248 for Llama 3.1 8B and 30,532,122,624 for
Qwen3-30B-A3B); the bytes of a quantized checkpoint are an estimate, since
packing and which layers stay unquantized vary by tool.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.errors import PlannerInputError

__all__ = ["DecoderShape", "Quantization", "decoder_parameter_count", "weight_bytes_estimate"]


@dataclass(frozen=True)
class DecoderShape:
    """The sizes that fix a standard decoder's parameter count.

    Attributes
    ----------
    vocab_size, hidden_size, num_layers : int
        Vocabulary, model width and decoder layers.
    num_attention_heads, num_kv_heads, head_dim : int
        Query heads, key/value heads and elements per head.
    intermediate_size : int
        Width of each dense MLP (or of each expert when ``num_experts`` > 0).
    num_experts : int
        Routed experts per layer; 0 for a dense MLP.
    shared_expert_intermediate_size : int
        Width of an always-on shared expert (Qwen2-MoE); 0 if none.
    tie_word_embeddings : bool
        The output head reuses the input embedding.
    qkv_bias : bool
        Q, K and V projections carry biases (Qwen2).
    qk_norm : bool
        Per-head RMS norms on Q and K (Qwen3).
    """

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    num_experts: int = 0
    shared_expert_intermediate_size: int = 0
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    qk_norm: bool = False


@dataclass(frozen=True)
class Quantization:
    """How a checkpoint stores its linear layers' weights.

    Attributes
    ----------
    linear_bits : float
        Bits per weight of the quantized linear layers (16 when not quantized).
    group_size : int
        Weights sharing one scale (and zero point); 0 for per-tensor scales.
    scale_bytes : float
        Bytes of scale and zero point per group.
    """

    linear_bits: float = 16.0
    group_size: int = 0
    scale_bytes: float = 0.0


def _parameter_split(shape: DecoderShape) -> tuple[int, int]:
    """(linear-layer parameters, everything else) of the decoder."""
    q_width = shape.num_attention_heads * shape.head_dim
    kv_width = shape.num_kv_heads * shape.head_dim
    attention = shape.hidden_size * q_width + 2 * shape.hidden_size * kv_width + q_width * shape.hidden_size
    mlp_one = 3 * shape.hidden_size * shape.intermediate_size
    if shape.num_experts:
        mlp = shape.num_experts * mlp_one + 3 * shape.hidden_size * shape.shared_expert_intermediate_size
    else:
        mlp = mlp_one
    linear = shape.num_layers * (attention + mlp)
    other_per_layer = 2 * shape.hidden_size  # input and post-attention norms
    if shape.qkv_bias:
        other_per_layer += q_width + 2 * kv_width
    if shape.qk_norm:
        other_per_layer += 2 * shape.head_dim
    if shape.num_experts:
        other_per_layer += shape.hidden_size * shape.num_experts  # router
        if shape.shared_expert_intermediate_size:
            other_per_layer += shape.hidden_size  # shared-expert gate
    embeddings = shape.vocab_size * shape.hidden_size * (1 if shape.tie_word_embeddings else 2)
    other = shape.num_layers * other_per_layer + embeddings + shape.hidden_size  # final norm
    return linear, other


def decoder_parameter_count(shape: DecoderShape) -> int:
    """Parameters of a standard decoder-only transformer.

    Parameters
    ----------
    shape : DecoderShape

    Returns
    -------
    int
        Parameter count, embeddings and output head included. [parameters]

    Notes
    -----
    ================================  =====================================
    Attention                         Q, K, V, O projections (GQA widths)
    MLP                               gate, up and down projections (SwiGLU)
    Norms                             two RMS norms per layer, one final
    Optional                          QKV biases, Q/K norms, experts, router
    ================================  =====================================

    Examples
    --------
    >>> decoder_parameter_count(DecoderShape(128256, 4096, 32, 32, 8, 128, 14336))
    8030261248
    """
    linear, other = _parameter_split(shape)
    return linear + other


def weight_bytes_estimate(shape: DecoderShape, dtype_bytes: float, quantization: Quantization | None = None) -> float:
    """Bytes of the checkpoint: unquantized parts at ``dtype_bytes``, linear layers as quantized.

    Parameters
    ----------
    shape : DecoderShape
    dtype_bytes : float
        Bytes per unquantized parameter (2 for bf16/fp16). [bytes]
    quantization : Quantization, optional
        How the linear layers are stored; unquantized when omitted.

    Returns
    -------
    float
        [bytes]
    """
    if not (math.isfinite(dtype_bytes) and dtype_bytes > 0):
        raise PlannerInputError(f"dtype_bytes must be > 0, got {dtype_bytes!r}")
    quantization = quantization or Quantization()
    linear, other = _parameter_split(shape)
    linear_bytes = linear * quantization.linear_bits / 8
    if quantization.group_size:
        linear_bytes += linear / quantization.group_size * quantization.scale_bytes
    if quantization.linear_bits >= 16:
        linear_bytes = linear * dtype_bytes
    return linear_bytes + other * dtype_bytes
