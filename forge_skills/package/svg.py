"""Small inline-SVG charts for a self-contained HTML page: horizontal bars, a heatmap, line
curves and an interval (forest) plot. Standard library only; every mark carries a <title> so a
reader hovering it sees the exact number."""

from __future__ import annotations

from html import escape
from typing import Sequence

PALETTE = ("#3b6ea8", "#d9822b", "#4a9c5d", "#b04a5a", "#7a5ea8", "#8c6d3f", "#2d9ca3", "#a83b8a")
FONT = 'font-family="system-ui, sans-serif" font-size="12"'


def _svg(name: str, width: int, height: int, body: list[str], title: str) -> str:
    return (f'<svg class="plot" data-plot="{escape(name)}" role="img" aria-label="{escape(title)}" '
            f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">'
            + "".join(body) + "</svg>")


def _text(x: float, y: float, text: str, anchor: str = "start", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {FONT} {extra}>{escape(text)}</text>'


def _label(x: float, y: float, text: str, room: int, anchor: str = "start", extra: str = "") -> str:
    """A label cut to ``room`` characters with an ellipsis where it is longer; hovering it shows
    the whole text."""
    if len(text) <= room:
        return _text(x, y, text, anchor, extra)
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {FONT} {extra}>'
            f"<title>{escape(text)}</title>{escape(text[:room - 1])}\u2026</text>")


def bars(name: str, labels: Sequence[str], values: Sequence[float], *, title: str, maximum: float | None = None,
         fmt: str = "{:.3f}", colours: Sequence[str] | None = None, origin: float = 0.0) -> str:
    """One horizontal bar per label; negative values extend left of ``origin``'s axis."""
    label_w, bar_w, row = 270, 380, 22
    low = min([origin, *values]) if values else origin
    high = maximum if maximum is not None else max([origin, *values, 1e-9])
    span = (high - low) or 1.0
    x0 = label_w + (origin - low) / span * bar_w
    body = [f'<line x1="{x0:.1f}" y1="4" x2="{x0:.1f}" y2="{row * len(labels) + 6}" stroke="#555"/>']
    for k, (label, v) in enumerate(zip(labels, values)):
        y = 6 + k * row
        x1 = label_w + (min(v, origin) - low) / span * bar_w
        w = abs(v - origin) / span * bar_w
        colour = (colours[k] if colours else PALETTE[0])
        body.append(_label(label_w - 6, y + 14, label, 40, "end"))
        body.append(f'<rect x="{x1:.1f}" y="{y + 3}" width="{max(w, 1.0):.1f}" height="{row - 6}" fill="{colour}">'
                    f"<title>{escape(label)}: {escape(fmt.format(v))}</title></rect>")
        body.append(_text(label_w + bar_w + 8, y + 14, fmt.format(v)))
    return _svg(name, label_w + bar_w + 70, row * max(1, len(labels)) + 12, body, title)


def heatmap(name: str, rows: Sequence[str], cols: Sequence[str], values: Sequence[Sequence[float | None]], *,
            title: str, fmt: str = "{:g}", maximum: float | None = None) -> str:
    """A grid of cells shaded by value (blank where None), the value written in each."""
    label_w, cell, head = 270, 64, 110
    top = max([v for r in values for v in r if v is not None] or [1.0])
    top = maximum if maximum is not None else (top or 1.0)
    body = []
    for j, c in enumerate(cols):
        x = label_w + j * cell + cell / 2
        body.append(_label(x, head - 6, c, 22, "start", f'transform="rotate(-40 {x:.1f} {head - 6})"'))
    for i, r in enumerate(rows):
        y = head + i * cell / 2
        body.append(_label(label_w - 6, y + 20, r, 40, "end"))
        for j, v in enumerate(values[i]):
            x = label_w + j * cell
            shade = 0.0 if v is None else max(0.0, min(1.0, v / top))
            fill = "#f4f4f4" if v is None else f"rgb({int(245 - 185 * shade)},{int(248 - 140 * shade)},{int(252 - 84 * shade)})"
            body.append(f'<rect x="{x}" y="{y:.1f}" width="{cell - 2}" height="{cell / 2 - 2:.1f}" fill="{fill}">'
                        f"<title>{escape(r)} x {escape(cols[j])}: {'' if v is None else escape(fmt.format(v))}</title></rect>")
            if v is not None:
                colour = "#fff" if shade > 0.6 else "#222"
                body.append(_text(x + cell / 2 - 1, y + 20, fmt.format(v), "middle", f'fill="{colour}"'))
    # The rotated column labels lean right: room for the last one's length.
    return _svg(name, label_w + cell * max(1, len(cols)) + 110, int(head + cell / 2 * max(1, len(rows)) + 10), body,
                title)


def curves(name: str, x: Sequence[float], series: dict[str, Sequence[float]], *, title: str, x_label: str,
           y_label: str, marks: dict[str, float] | None = None) -> str:
    """Line curves over a shared x; ``marks``: a dot on each named curve at the x given."""
    w, h, left, bottom = 640, 260, 76, 40
    y_top = max([v for s in series.values() for v in s if v is not None] or [1.0]) or 1.0
    x_lo, x_hi = min(x), max(x)

    def px(v: float) -> float:
        return left + (v - x_lo) / ((x_hi - x_lo) or 1.0) * (w - left - 20)

    def py(v: float) -> float:
        return h - bottom - v / y_top * (h - bottom - 16)

    body = [f'<line x1="{left}" y1="{h - bottom}" x2="{w - 20}" y2="{h - bottom}" stroke="#555"/>',
            f'<line x1="{left}" y1="16" x2="{left}" y2="{h - bottom}" stroke="#555"/>',
            _text((left + w - 20) / 2, h - 8, x_label, "middle"),
            _text(14, (h - bottom) / 2, y_label, "middle", f'transform="rotate(-90 14 {(h - bottom) / 2:.1f})"'),
            _text(left - 4, 20, f"{y_top:.4g}" if y_top < 1e4 else f"{y_top:.0f}", "end"),
            _text(left - 4, h - bottom, "0", "end")]
    for t in range(int(x_lo), int(x_hi) + 1):
        body.append(_text(px(t), h - bottom + 14, str(t), "middle"))
    for k, (label, s) in enumerate(series.items()):
        colour = PALETTE[k % len(PALETTE)]
        points = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in zip(x, s) if b is not None)
        body.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}">'
                    f"<title>{escape(label)}</title></polyline>")
        body.append(_text(w - 24, 20 + 14 * k, label, "end", f'fill="{colour}"'))
        if marks and label in marks:
            xm = marks[label]
            ym = min(range(len(x)), key=lambda i: abs(x[i] - xm))
            body.append(f'<circle cx="{px(xm):.1f}" cy="{py(s[ym] or 0):.1f}" r="4" fill="none" stroke="{colour}">'
                        f"<title>peak at {xm:g}</title></circle>")
    return _svg(name, w, h, body, title)


def intervals(name: str, points: Sequence[float], lows: Sequence[float | None], highs: Sequence[float | None], *,
              title: str, guides: Sequence[float] = ()) -> str:
    """One column per item, sorted as given: a dot at the estimate and a line over its interval."""
    w, h, left, bottom = 620, 240, 50, 24
    values = [v for v in [*points, *lows, *highs] if v is not None]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    span = (hi - lo) or 1.0
    step = (w - left - 10) / max(1, len(points))

    def py(v: float) -> float:
        return h - bottom - (v - lo) / span * (h - bottom - 10)

    body = [f'<line x1="{left}" y1="{h - bottom}" x2="{w - 10}" y2="{h - bottom}" stroke="#555"/>',
            _text(left - 4, py(hi) + 4, f"{hi:.2f}", "end"), _text(left - 4, py(lo), f"{lo:.2f}", "end"),
            _text((left + w) / 2, h - 6, "items, by estimated slope", "middle")]
    for g in guides:
        if lo <= g <= hi:
            body.append(f'<line x1="{left}" y1="{py(g):.1f}" x2="{w - 10}" y2="{py(g):.1f}" stroke="#bbb" '
                        f'stroke-dasharray="4 3"/>')
            body.append(_text(w - 12, py(g) - 2, f"{g:g}", "end", 'fill="#888"'))
    for k, (p, a, b) in enumerate(zip(points, lows, highs)):
        x = left + (k + 0.5) * step
        if a is not None and b is not None:
            body.append(f'<line x1="{x:.2f}" y1="{py(a):.1f}" x2="{x:.2f}" y2="{py(b):.1f}" stroke="#9db4d3"/>')
        body.append(f'<circle cx="{x:.2f}" cy="{py(p):.1f}" r="1.6" fill="{PALETTE[0]}"><title>a = {p:.3f}'
                    f"{'' if a is None or b is None else f' [{a:.3f}, {b:.3f}]'}</title></circle>")
    return _svg(name, w, h, body, title)
