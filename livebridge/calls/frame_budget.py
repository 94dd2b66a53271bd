"""Answers that must share one frame, cut to fit its byte budget fairly.

Every output above a common cap is cut to that cap, the cap being the largest that fits: small
results go out untouched and large ones share what is left evenly. Error answers are never cut
(their message is already bounded by ``payloads.MAX_ERROR_MESSAGE``).

Every answer is measured, errors and rejections included. A unit that cannot fit one frame even
with every output cut to nothing (thousands of calls in one turn: their ids, names and errors
alone are larger than a frame) is split: its first answers that fit go whole, in order, and the
rest wait for the next frame (``take`` says so with ``split``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import msgspec

from livebridge.calls import payloads
from livebridge.calls.call import Outcome, Partial

A = TypeVar("A", Outcome, Partial, Outcome | Partial)
Owner = TypeVar("Owner")
Encode = Callable[[Sequence[tuple[Owner, A]]], list[dict[str, Any]]]
#: What a frame must hold per answer for every batch to fit: id, name and the smallest cut
#: output (``{"output":"","truncated":true,"original_bytes":N}``), with room to spare.
BYTES_PER_CALL = 256
_encode = msgspec.json.Encoder().encode
#: Wire dicts as the JSON array a frame carries (compact, as ``wire.encode`` writes them).
encode: Callable[[list[dict[str, Any]]], bytes] = _encode


def take(
    items: Sequence[tuple[Owner, A]],
    unit_of: Callable[[Owner], object],
    encode: Encode[Owner, A],
    budget: int,
) -> tuple[list[tuple[Owner, A]], list[dict[str, Any]], bool]:
    """The first ``items`` (owner, answer) whose wire dicts fit ``budget``, whole units in order,
    and whether the last unit taken was split (its rest is not taken).

    A unit is the consecutive items whose owners share a ``unit_of`` (None: an item alone):
    they go in one frame. A first unit too large for a frame alone is cut to fit (``fit``);
    one too large even cut to nothing goes out in parts (``head``).
    """
    taken: list[tuple[Owner, A]] = []
    responses: list[dict[str, Any]] = []
    while len(taken) < len(items):
        start = len(taken)
        group, end = unit_of(items[start][0]), start + 1
        if group is not None:
            while end < len(items) and unit_of(items[end][0]) is group:
                end += 1
        unit = items[start:end]
        encoded = encode(unit)
        size = joined_size(encoded)
        if size > budget:
            if taken:  # it waits for the next frame
                break
            cut, cut_encoded = _cut(unit, encode, budget)
            if joined_size(cut_encoded) > budget:  # more than a frame even cut: in parts
                part, part_encoded = head(unit, encoded, encode, budget)
                return part, part_encoded, len(part) < len(unit)
            unit, encoded = cut, cut_encoded
            size = budget
        taken += unit
        responses += encoded
        budget -= size
    return taken, responses, False


def head(
    unit: Sequence[tuple[Owner, A]],
    encoded: list[dict[str, Any]],
    encode: Encode[Owner, A],
    budget: int,
) -> tuple[list[tuple[Owner, A]], list[dict[str, Any]]]:
    """The longest prefix of ``unit`` (``encoded``: its wire dicts) whose answers fit ``budget``
    whole; at least one answer, cut to fit if it is alone larger than the frame."""
    room, count = budget, 0
    for response in encoded:
        size = len(_encode(response)) + 1  # and its comma
        if size > room:
            break
        room -= size
        count += 1
    if not count:
        return _cut(unit[:1], encode, budget)
    return list(unit[:count]), encoded[:count]


def _cut(
    unit: Sequence[tuple[Owner, A]], encode: Encode[Owner, A], budget: int
) -> tuple[list[tuple[Owner, A]], list[dict[str, Any]]]:
    owners = [owner for owner, _ in unit]

    def encode_one(index: int, answer: A) -> dict[str, Any]:
        return encode([(owners[index], answer)])[0]

    answers, encoded = fit([answer for _, answer in unit], encode_one, budget)
    return list(zip(owners, answers, strict=True)), encoded


def fit(
    answers: Sequence[A], encode: Callable[[int, A], dict[str, Any]], budget: int
) -> tuple[list[A], list[dict[str, Any]]]:
    """``answers`` cut so that their wire dicts (``encode``), comma-separated, fit ``budget``."""
    encoded = [encode(i, answer) for i, answer in enumerate(answers)]
    sizes = [payloads.encoded_size(answer.response) for answer in answers]
    cuttable = [i for i, answer in enumerate(answers) if "output" in answer.response]
    whole = joined_size(encoded)
    fixed = whole - sum(sizes[i] for i in cuttable)
    cap = water_level([sizes[i] for i in cuttable], budget - fixed)
    result = list(answers)
    for i in cuttable:
        if sizes[i] > cap:
            result[i] = shrunk(answers[i], cap)
            encoded[i] = encode(i, result[i])
    return result, encoded


def joined_size(responses: list[dict[str, Any]]) -> int:
    """Bytes ``responses`` add to a frame: each one's JSON and a comma (one encode, not one each).

    ``[a,b]`` is ``a`` and ``b`` with a comma each, plus one bracket.
    """
    return array_size(_encode(responses)) if responses else 0


def array_size(array: bytes) -> int:
    """``joined_size`` of the responses ``array`` (their non-empty JSON array) encodes."""
    return len(array) - 1


def water_level(sizes: list[int], room: int) -> int:
    """The largest cap such that ``sum(min(size, cap))`` stays within ``room``."""
    remaining, count, level = room, len(sizes), 0
    for size in sorted(sizes):
        share = remaining // count
        if size > share:
            return max(share, 0)
        remaining -= size
        count -= 1
        level = size
    return level


def shrunk(answer: A, cap: int) -> A:
    """``answer`` with its output cut to ``cap`` bytes (keeping the first original size)."""
    payload = payloads.shrink(answer.response, cap)
    if isinstance(answer, Partial):
        return dataclasses.replace(answer, response=payload.response)
    return msgspec.structs.replace(
        answer,
        response=payload.response,
        result_bytes=payload.result_bytes,
        truncated=True,
        original_bytes=payload.original_bytes,
    )
