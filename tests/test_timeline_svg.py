"""The timeline chart: well-formed SVG with no script, a lane per service and breaker,
strings from the store shown literally; rendered to pixels (rsvg-convert, when there),
its outage shading, bars and breaker states land where the run times say."""

from __future__ import annotations

import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import pytest

from errorflow.reports.timeline import TimelineJson
from errorflow.reports.timeline_svg import (
    BREAKER_H,
    DOWN,
    GAP,
    LEFT,
    LOAD,
    MARK_H,
    MAX_LANES,
    RIGHT,
    SERVICE_H,
    STATE_COLOURS,
    TOP,
    WIDTH,
    tick_step,
    timeline_svg,
)

NS = "{http://www.w3.org/2000/svg}"


def sample(name: str = "search_api", breakers: int = 1) -> TimelineJson:
    n = 20  # 10 s buckets over 200 s; down 60-120 s, failing 60-80 s, shedding after
    calls = [2] * 6 + [8, 8] + [0] * 4 + [2] * 8
    failed = [0] * 6 + [8, 8] + [0] * 12
    shed = [0] * 8 + [2] * 4 + [0] * 8
    return {
        "bucket_s": 10.0,
        "buckets": n,
        "span_s": 200.0,
        "services": {
            name: {
                "calls": calls,
                "answered": [c - f for c, f in zip(calls, failed, strict=True)],
                "rate_limited": [0] * 19 + [1],
                "failed": failed,
                "shed": shed,
                "down": [6 <= i < 12 for i in range(n)],
                "outages": [[60.0, 120.0]],
                "baseline_calls": [2] * n,
            }
        },
        "breakers": [
            {
                "agent": f"researcher{i}",
                "tool": "search_papers",
                "pattern": None,
                "scope": "run",
                "transitions": 2,
                "intervals": [
                    {"state": "closed", "start_s": 0.0, "end_s": 75.0},
                    {"state": "open", "start_s": 75.0, "end_s": 110.0},
                    {"state": "half_open", "start_s": 110.0, "end_s": 111.0},
                    {"state": "closed", "start_s": 111.0, "end_s": 200.0},
                ],
            }
            for i in range(breakers)
        ],
    }


def x_of(t: float, span: float = 200.0) -> float:
    return LEFT + (WIDTH - LEFT - RIGHT) * t / span


def test_well_formed_with_lanes_axis_and_legend() -> None:
    svg = timeline_svg(sample())
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg" and not root.findall(f".//{NS}script")
    texts = [t.text or "" for t in root.iter(f"{NS}text")]
    assert "search_api" in texts and any(t.startswith("researcher0 ›") for t in texts)
    for label in (
        "answered",
        "429",
        "failed (5xx, timeout)",
        "shed (never sent)",
        "baseline",
        "service down",
        "breaker open",
        "breaker half-open",
        "breaker closed",
    ):
        assert label in texts
    assert [t for t in texts if t in ("0", "50", "100", "150", "200")] == [
        "0", "50", "100", "150", "200"
    ]  # fmt: skip
    down = [
        r
        for r in root.iter(f"{NS}rect")
        if r.get("fill") == DOWN and r.find(f"{NS}title") is not None
    ]
    assert len(down) == 1
    assert float(down[0].get("x", 0)) == pytest.approx(x_of(60), abs=0.1)
    assert float(down[0].get("width", 0)) == pytest.approx(x_of(120) - x_of(60), abs=0.1)
    opened = [r for r in root.iter(f"{NS}rect") if r.get("fill") == STATE_COLOURS["open"]]
    assert float(opened[0].get("x", 0)) == pytest.approx(x_of(75), abs=0.1)
    assert root.find(f".//{NS}polyline") is not None  # the baseline


def test_store_strings_are_text_not_markup() -> None:
    svg = timeline_svg(sample(name="<script>x</script>&"), title='"><script>')
    assert "<script>" not in svg
    ET.fromstring(svg)  # still well-formed


def test_too_many_lanes_are_counted_not_drawn() -> None:
    svg = timeline_svg(sample(breakers=MAX_LANES + 3))
    assert "4 more lane(s) not drawn" in svg


def test_a_shared_peak_rescales_the_bars() -> None:
    def tallest(svg: str) -> float:
        rects = ET.fromstring(svg).iter(f"{NS}rect")
        return max(float(r.get("height", 0)) for r in rects if r.get("fill") == LOAD["failed"])

    own, shared = timeline_svg(sample()), timeline_svg(sample(), peaks={"search_api": 16})
    assert tallest(shared) == pytest.approx(tallest(own) / 2, abs=0.2)


@pytest.mark.parametrize(("span", "step"), [(200.0, 50.0), (20.9, 5.0), (0.0, 0.2), (7.0, 1.0)])
def test_tick_step(span: float, step: float) -> None:
    assert tick_step(span) == step


def read_png(data: bytes) -> tuple[int, list[list[tuple[int, int, int]]]]:
    """Width and RGB rows of an 8-bit RGB or RGBA PNG (what rsvg-convert writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, bpp = 8, b"", 0, 0, 4
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos : pos + 4]), data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride = zlib.decompress(idat), width * bpp
    rows: list[list[tuple[int, int, int]]] = []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        filt, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + _predict(filt, a, b, c)) & 0xFF
        rows.append([(line[x * bpp], line[x * bpp + 1], line[x * bpp + 2]) for x in range(width)])
        prev = line
    return width, rows


def _predict(kind: int, a: int, b: int, c: int) -> int:
    """PNG's filter predictors: none, sub, up, average, Paeth."""
    if kind == 4:
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        return a if pa <= pb and pa <= pc else b if pb <= pc else c
    return [0, a, b, (a + b) // 2][kind]


def rgb(hex_colour: str) -> tuple[int, int, int]:
    return int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16)


@pytest.mark.skipif(shutil.which("rsvg-convert") is None, reason="needs rsvg-convert")
def test_rendered_pixels_put_outage_bars_and_breaker_states_in_place(tmp_path: Path) -> None:
    svg = tmp_path / "t.svg"
    svg.write_text(timeline_svg(sample()))
    png = subprocess.run(["rsvg-convert", str(svg)], capture_output=True, check=True).stdout
    width, rows = read_png(png)
    assert width == WIDTH

    def pixel(t: float, y: int) -> tuple[int, int, int]:
        return rows[y][round(x_of(t))]

    lane_top, floor = TOP, TOP + SERVICE_H
    assert pixel(100, lane_top + 3) == rgb(DOWN)  # shaded above the low bars while down
    assert pixel(30, lane_top + 3) == (255, 255, 255)  # not before it
    assert pixel(65, floor - 3) == rgb(LOAD["failed"])  # the failing calls of 60-80 s
    assert pixel(35, floor - 3) == rgb(LOAD["answered"])
    assert pixel(105, floor - 3) == rgb(LOAD["shed"])  # shed while the breaker was open
    assert pixel(65, floor + MARK_H // 2) == rgb(LOAD["failed"])  # the failure strip
    breaker = floor + MARK_H + GAP + BREAKER_H // 2
    assert pixel(90, breaker) == rgb(STATE_COLOURS["open"])
    assert pixel(150, breaker) == rgb(STATE_COLOURS["closed"])
