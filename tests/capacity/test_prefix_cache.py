"""Shared prompt prefixes: KV per request and requests held, from a hit fraction or a prefix length."""

from __future__ import annotations

import math

import pytest

from planner.capacity.prefix_cache import kv_with_shared_prefix, shared_prefix_tokens
from planner.errors import PlannerInputError


def test_no_sharing_is_the_plain_division():
    sharing = kv_with_shared_prefix(257_584, 1000.0, 0.0)
    assert sharing.requests_shared == sharing.requests_unshared == pytest.approx(257.584)
    assert sharing.kv_tokens_per_request == pytest.approx(1000.0)
    assert sharing.overstatement_frac == pytest.approx(0.0)


def test_a_shared_prefix_is_stored_once():
    # 257,584 tokens, 1,000-token requests sharing 400 tokens: S + n (L - S) = C.
    sharing = kv_with_shared_prefix(257_584, 1000.0, 400.0)
    n = sharing.requests_shared
    assert n == pytest.approx((257_584 - 400) / 600)
    assert 400 + n * 600 == pytest.approx(257_584)
    assert sharing.kv_tokens_per_request == pytest.approx(600 + 400 / n)
    assert sharing.overstatement_frac == pytest.approx(1000 / (600 + 400 / n) - 1)
    # Each request adds its own tokens plus a share of the prefix: between L - S and L.
    assert 600 < sharing.kv_tokens_per_request < 1000


def test_more_sharing_holds_more_requests():
    counts = [kv_with_shared_prefix(100_000, 2000.0, s).requests_shared for s in (0, 500, 1000, 1500)]
    assert counts == sorted(counts) and counts[-1] > 3 * counts[0]


def test_shared_tokens_from_a_hit_fraction_and_from_a_common_prefix():
    assert shared_prefix_tokens(800.0, prefix_cache_hit_frac=0.5) == 400.0
    assert shared_prefix_tokens(800.0, prefix_cache_hit_frac=0.0) == 0.0
    # Whole blocks only: a 1,000-token system prompt shares 62 blocks of 16.
    assert shared_prefix_tokens(1200.0, common_prefix_tokens=1000.0) == 992.0
    assert shared_prefix_tokens(1200.0, common_prefix_tokens=1000.0, block_size=64) == 960.0
    # Never the last prompt token: a prompt that is all prefix shares the blocks before its last token.
    assert shared_prefix_tokens(1024.0, common_prefix_tokens=5000.0) == 1008.0
    assert shared_prefix_tokens(10.0, common_prefix_tokens=10.0) == 0.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"prompt_tokens": 800.0}, "exactly one of"),
        ({"prompt_tokens": 800.0, "prefix_cache_hit_frac": 0.5, "common_prefix_tokens": 10.0}, "exactly one of"),
        ({"prompt_tokens": 800.0, "prefix_cache_hit_frac": 1.0}, "below 1"),
        ({"prompt_tokens": 800.0, "prefix_cache_hit_frac": -0.1}, ">= 0"),
        ({"prompt_tokens": 0.0, "prefix_cache_hit_frac": 0.1}, "prompt_tokens must be a number > 0"),
        ({"prompt_tokens": 800.0, "prefix_cache_hit_frac": 0.1, "block_size": 0}, "block_size"),
    ],
)
def test_shared_prefix_tokens_rejects_bad_input(kwargs, message):
    with pytest.raises(PlannerInputError, match=message):
        shared_prefix_tokens(**kwargs)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((1000.0, 500.0, 500.0), "below tokens_per_request"),
        ((300.0, 1000.0, 400.0), "cannot hold"),
        ((0.0, 1000.0, 0.0), "kv_tokens must be a number > 0"),
        ((1000.0, math.nan, 0.0), "tokens_per_request"),
        ((1000.0, 100.0, -1.0), "shared_tokens must be a number >= 0"),
    ],
)
def test_kv_with_shared_prefix_rejects_bad_input(args, message):
    with pytest.raises(PlannerInputError, match=message):
        kv_with_shared_prefix(*args)
