"""Placing labels on a time axis without overlap: pure geometry, no drawing library."""
from __future__ import annotations


def text_px(text: str, fontsize: float, dpi: float) -> float:
    """A generous estimate of a label's width in pixels (DejaVu Sans averages ~0.55 em a character)."""
    return len(text) * fontsize * 0.58 * dpi / 72 + 4


def stack(items, px_per_tick: float, fontsize: float, dpi: float, levels: int, right_edge: float) -> list[tuple]:
    """Greedy label placement.

    Each (t, text, priority) takes the first level where it overlaps no label placed
    before it (higher priority first, then by tick); a label that would run past
    `right_edge` ends at its tick instead. Labels with no free level are left out.
    Returns (t, text, level, ha).
    """
    placed: list[list[tuple[float, float]]] = [[] for _ in range(levels)]
    out = []
    for t, text, prio in sorted(items, key=lambda x: (-x[2], x[0])):
        w = text_px(text, fontsize, dpi) / px_per_tick
        ha = "right" if t + w > right_edge else "left"
        lo, hi = (t - w, t + 3 / px_per_tick) if ha == "right" else (t - 3 / px_per_tick, t + w)
        for level in range(levels):
            if all(hi < a or lo > b for a, b in placed[level]):
                placed[level].append((lo, hi))
                out.append((t, text, level, ha))
                break
    return out


def merge_close(items: list[tuple[int, str]], gap: float) -> list[tuple[int, str]]:
    """Events closer than `gap` ticks share one label ('placed, authorised, cap-1 submitted')."""
    out: list[tuple[int, list[str]]] = []
    for t, text in sorted(items):
        if out and t - out[-1][0] < gap and len(out[-1][1]) < 3:
            out[-1][1].append(text)
        else:
            out.append((t, [text]))
    return [(t, ", ".join(texts)) for t, texts in out]


def levels(intervals: list[tuple[float, float]], n: int) -> list[int]:
    """A level in 0..n-1 per interval (in the order given) so that intervals on one level do not overlap."""
    ends: list[list[tuple[float, float]]] = [[] for _ in range(n)]
    out = []
    for a, b in intervals:
        for level in range(n):
            if all(b < x or a > y for x, y in ends[level]):
                break
        ends[level].append((a, b))
        out.append(level)
    return out
