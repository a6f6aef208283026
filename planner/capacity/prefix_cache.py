"""The ``prefix_cache`` module says how much KV a request really adds when prompts share a prefix.

With prefix caching (on by default in vLLM's V1 engine), requests whose
prompts begin with the same tokens share the KV blocks of that prefix: a
block is stored once and referenced by every running request that uses it.
Dividing the cache's tokens by the tokens of one request then overstates
what each request holds, and understates how many fit.

The saving only exists while the requests that share are in flight together,
on the same replica. A prefix-cache hit on blocks left by a request that has
already finished saves the prefill compute, but the blocks become the new
request's own: the memory is the same as without the hit. So a measured hit
fraction (``vllm:prefix_cache_hits`` over ``vllm:prefix_cache_queries``, in
prompt tokens) bounds the sharing from above; a common system prompt under
load comes close to the bound, a chat's own earlier turns do not.

The arithmetic is mean-field and in tokens of one full-attention cache group:
``n`` requests of ``prompt + output`` tokens sharing ``S`` prompt tokens need
``S + n x (prompt + output - S)`` tokens, so ``n = (C - S) / (L - S)`` fit
in ``C`` tokens, and each request costs ``L - S + S / n`` on average. Partly
filled blocks are ignored, as in :func:`planner.capacity.kv_cache.concurrent_requests`.
No I/O here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.errors import PlannerInputError

__all__ = [
    "PrefixSharing",
    "kv_with_shared_prefix",
    "shared_prefix_tokens",
]


@dataclass(frozen=True)
class PrefixSharing:
    """KV held per request and requests held at once, with and without a shared prefix.

    Attributes
    ----------
    kv_tokens : float
        Tokens the cache holds (one full-attention group). [tokens]
    tokens_per_request : float
        Prompt plus output tokens of a mean request. [tokens]
    shared_tokens : float
        Prompt tokens of each request held once for all requests in flight. [tokens]
    requests_unshared : float
        Requests held at once counting every request's full length. [requests]
    requests_shared : float
        Requests held at once when the prefix is stored once. [requests]
    kv_tokens_per_request : float
        What one request really adds on average: its own tokens plus its share
        of the prefix. [tokens]
    overstatement_frac : float
        How much ``tokens_per_request`` overstates ``kv_tokens_per_request``:
        ``tokens_per_request / kv_tokens_per_request - 1``. [fraction]
    """

    kv_tokens: float
    tokens_per_request: float
    shared_tokens: float
    requests_unshared: float
    requests_shared: float
    kv_tokens_per_request: float
    overstatement_frac: float


def _positive(name: str, value) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise PlannerInputError(f"{name} must be a number > 0, got {value!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise PlannerInputError(f"{name} must be a number > 0, got {value!r}")
    return number


def _non_negative(name: str, value) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise PlannerInputError(f"{name} must be a number >= 0, got {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise PlannerInputError(f"{name} must be a number >= 0, got {value!r}")
    return number


def shared_prefix_tokens(
    prompt_tokens: float,
    *,
    prefix_cache_hit_frac: float | None = None,
    common_prefix_tokens: float | None = None,
    block_size: int = 16,
) -> float:
    """Prompt tokens per request that the prefix cache can serve from blocks already stored. [tokens]

    Give exactly one of ``prefix_cache_hit_frac`` and ``common_prefix_tokens``.

    Parameters
    ----------
    prompt_tokens : float
        Mean prompt length. [tokens]
    prefix_cache_hit_frac : float, optional
        vLLM's hit fraction, ``prefix_cache_hits / prefix_cache_queries``
        (already in whole blocks): the shared tokens are the fraction times
        ``prompt_tokens``. [fraction]
    common_prefix_tokens : float, optional
        A prefix every prompt starts with (a system prompt, few-shot
        examples). vLLM shares whole blocks only and always computes the last
        prompt token, so the shared part is the whole blocks of the prefix,
        at most the whole blocks before the last prompt token. [tokens]
    block_size : int
        Tokens per KV block. [tokens]

    Examples
    --------
    A 1,000-token system prompt in front of 1,200-token prompts, blocks of 16:

    >>> shared_prefix_tokens(1200.0, common_prefix_tokens=1000.0)
    992.0
    >>> shared_prefix_tokens(1200.0, prefix_cache_hit_frac=0.5)
    600.0
    """
    prompt_tokens = _positive("prompt_tokens", prompt_tokens)
    if (prefix_cache_hit_frac is None) == (common_prefix_tokens is None):
        raise PlannerInputError("give exactly one of prefix_cache_hit_frac and common_prefix_tokens")
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise PlannerInputError(f"block_size must be a whole number >= 1, got {block_size!r}")
    if prefix_cache_hit_frac is not None:
        hit_frac = _non_negative("prefix_cache_hit_frac", prefix_cache_hit_frac)
        if hit_frac >= 1:
            raise PlannerInputError(
                "prefix_cache_hit_frac must be below 1 (vLLM always computes the last prompt token), "
                f"got {prefix_cache_hit_frac!r}"
            )
        return hit_frac * prompt_tokens
    common = _non_negative("common_prefix_tokens", common_prefix_tokens)
    usable = min(common, math.ceil(prompt_tokens) - 1)
    return float(max(0, math.floor(usable / block_size)) * block_size)


def kv_with_shared_prefix(kv_tokens: float, tokens_per_request: float, shared_tokens: float) -> PrefixSharing:
    """Requests held at once and KV per request when every request shares ``shared_tokens`` of its prompt.

    Parameters
    ----------
    kv_tokens : float
        Tokens the cache holds: blocks x block size of one full-attention
        group (:attr:`planner.capacity.kv_cache.KvCapacity.group_tokens`). [tokens]
    tokens_per_request : float
        Mean prompt plus output tokens of a request. [tokens]
    shared_tokens : float
        Prompt tokens per request stored once for all requests in flight, from
        :func:`shared_prefix_tokens`. [tokens]

    Returns
    -------
    PrefixSharing

    Examples
    --------
    257,584 tokens, 1,000-token requests, 400 tokens of each prompt shared:

    >>> sharing = kv_with_shared_prefix(257_584, 1000.0, 400.0)
    >>> round(sharing.requests_unshared, 1), round(sharing.requests_shared, 1)
    (257.6, 428.6)
    >>> round(sharing.kv_tokens_per_request), round(sharing.overstatement_frac, 3)
    (601, 0.664)
    """
    kv_tokens = _positive("kv_tokens", kv_tokens)
    length = _positive("tokens_per_request", tokens_per_request)
    shared_tokens = _non_negative("shared_tokens", shared_tokens)
    if shared_tokens >= length:
        raise PlannerInputError(
            f"shared_tokens ({shared_tokens:g}) must be below tokens_per_request ({length:g}): "
            "a request always computes at least its last prompt token"
        )
    if kv_tokens <= shared_tokens:
        raise PlannerInputError(
            f"a KV cache of {kv_tokens:,.0f} tokens cannot hold the {shared_tokens:,.0f}-token "
            "shared prefix and a request besides"
        )
    unshared = kv_tokens / length
    shared = (kv_tokens - shared_tokens) / (length - shared_tokens)
    per_request = length - shared_tokens + shared_tokens / shared  # = kv_tokens / shared
    return PrefixSharing(
        kv_tokens=kv_tokens,
        tokens_per_request=length,
        shared_tokens=shared_tokens,
        requests_unshared=unshared,
        requests_shared=shared,
        kv_tokens_per_request=per_request,
        overstatement_frac=length / per_request - 1.0,
    )
