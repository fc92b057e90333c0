"""What the target topics hold, from the capture: per partition the offsets and sequences of
each lane, which the translated offsets are judged against."""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass



@dataclass
class _Partition:
    """One target partition as captured: per (producer, lane) the offsets and seqs, in offset order."""

    end: int = 0  # one past the highest offset captured (any record)
    lanes: dict[tuple[str, int], tuple[list[int], list[int]]] = field(default_factory=dict)

    def first_unconsumed(self, consumed: Mapping[tuple[str, int], list[tuple[int, int]]]) -> int:
        best = self.end
        for key, (offs, seqs) in self.lanes.items():
            ranges = consumed.get(key, [])
            starts = [a for a, _ in ranges]
            for off, seq in zip(offs, seqs, strict=True):
                if off >= best:
                    break
                if not _member(seq, ranges, starts):
                    best = off
                    break
        return best

    def evaluate(self, consumed: Mapping[tuple[str, int], list[tuple[int, int]]], resume: int) -> tuple[
            int, int, list[dict[str, Any]], list[dict[str, Any]]]:
        """(skipped, rereads, skipped examples, reread examples) for a consumer resuming at ``resume``."""
        skipped = rereads = 0
        skipped_rows: list[dict[str, Any]] = []
        reread_rows: list[dict[str, Any]] = []
        for (pid, lane), (offs, seqs) in sorted(self.lanes.items()):
            ranges = consumed.get((pid, lane), [])
            starts = [a for a, _ in ranges]
            last_copy: dict[int, int] = {}
            reread_here: list[tuple[int, int]] = []
            for off, seq in zip(offs, seqs, strict=True):
                if _member(seq, ranges, starts):
                    if off >= resume:
                        rereads += 1
                        reread_here.append((seq, off))
                else:
                    last_copy[seq] = max(off, last_copy.get(seq, -1))
            lost = sorted((seq, off) for seq, off in last_copy.items() if off < resume)
            skipped += len(lost)
            skipped_rows += _ranges_rows(pid, lane, lost)
            reread_rows += _ranges_rows(pid, lane, reread_here)
        skipped_rows.sort(key=lambda r: r["first_offset"])
        reread_rows.sort(key=lambda r: r["first_offset"])
        return skipped, rereads, skipped_rows, reread_rows


def _member(seq: int, ranges: list[tuple[int, int]], starts: list[int]) -> bool:
    i = bisect_right(starts, seq) - 1
    return i >= 0 and ranges[i][0] <= seq <= ranges[i][1]


def _ranges_rows(pid: str, lane: int, pairs: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """(seq, offset) pairs -> rows of consecutive seqs: producer, lane, seqs, target offsets."""
    rows: list[dict[str, Any]] = []
    for seq, off in sorted(pairs):
        if rows and rows[-1]["last_seq"] == seq - 1:
            r = rows[-1]
            r["last_seq"], r["count"] = seq, r["count"] + 1
            r["first_offset"], r["last_offset"] = min(r["first_offset"], off), max(r["last_offset"], off)
        else:
            rows.append({"producer_id": pid, "lane": lane, "first_seq": seq, "last_seq": seq, "count": 1,
                         "first_offset": off, "last_offset": off})
    return rows


def _load_capture(run_dir: Path, topics: Iterable[str]) -> tuple[dict[tuple[str, int], _Partition], dict[str, Any]]:
    """Target partitions of ``topics`` (source names) as captured, and the capture status."""
    from ...rundir import CAPTURE_DIR, CAPTURE_STATUS

    wanted = set(topics)
    parts: dict[tuple[str, int], _Partition] = {}
    from ..segments import capture_segments, read_segment

    files = capture_segments(run_dir / CAPTURE_DIR, "part-")  # here, or in the run store
    status_path = run_dir / CAPTURE_STATUS
    status = json.loads(status_path.read_text()) if status_path.exists() else {}
    for key, end in status.get("warmup_ends", {}).items():  # warm-up records are not rows, but in the log
        topic, _, p = key.rpartition(":")
        if topic in wanted:
            parts[(topic, int(p))] = _Partition(end=int(end))
    if not files:
        return parts, status
    rows: dict[tuple[str, int], list[tuple[int, str | None, int | None, int | None]]] = {}
    for f in files:
        t = read_segment(f, ["topic", "partition", "offset", "producer_id", "lane", "seq"])
        for topic, part, off, pid, lane, seq in zip(*(t.column(c).to_pylist() for c in t.column_names), strict=True):
            if topic in wanted:
                rows.setdefault((topic, part), []).append((off, pid, lane, seq))
    for key, rs in rows.items():
        rs.sort(key=lambda r: r[0])
        p = parts[key] = _Partition(end=max(rs[-1][0] + 1, parts[key].end if key in parts else 0))
        for off, pid, lane, seq in rs:
            if pid is None or lane is None or seq is None:
                continue
            offs, seqs = p.lanes.setdefault((pid, lane), ([], []))
            offs.append(off)
            seqs.append(seq)
    return parts, status


