"""A stream's replication topology as an SVG drawn by the broker: upstreams on the left, replicas on the right.

Server-side SVG needs no script and no library: the page stays readable
without JavaScript and within its Content-Security-Policy (presentation
attributes, no inline style). Each link to a replica is coloured by its
state and labelled with its state and how many messages it is behind; a
paused link is dashed. A chain, ring, star or mesh is what each broker's
page shows of it: its own stream, where it comes from and where it goes
(the other brokers' pages show the rest).
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

WIDTH, ROW, BOX_W, BOX_H = 900, 64, 220, 44
LEFT, MIDDLE, RIGHT = 10, (WIDTH - BOX_W) // 2, WIDTH - BOX_W - 10
COLOURS = {"in-sync": "#2f7d32", "pending": "#9a6700", "paused": "#5c6678", "broken": "#b42318"}


def _box(x: int, y: int, title: str, subtitle: str) -> str:
    return (f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6" fill="#ffffff" stroke="#5c6678"/>'
            f'<text x="{x + 10}" y="{y + 18}" font-size="13" font-weight="600" fill="#1d2330">{escape(title)}</text>'
            f'<text x="{x + 10}" y="{y + 35}" font-size="11" fill="#5c6678">{escape(subtitle)}</text>')


def _y(index: int, count: int, rows: int) -> int:
    """Rows of `count` boxes centred in a drawing `rows` rows high."""
    return 10 + index * ROW + (rows - count) * ROW // 2


def topology_svg(path: str, upstreams: list[str], replicas: list[dict[str, Any]]) -> Markup:
    """The SVG markup (safe: every name escaped) of one stream's links."""
    rows = max(len(upstreams), len(replicas), 1)
    height = rows * ROW + 10
    centre = _y(0, 1, rows)
    parts = [_box(MIDDLE, centre, path, "this stream")]
    for i, upstream in enumerate(upstreams):
        y = _y(i, len(upstreams), rows)
        parts.append(f'<line x1="{LEFT + BOX_W}" y1="{y + BOX_H // 2}" x2="{MIDDLE}" y2="{centre + BOX_H // 2}" '
                     'stroke="#5c6678" stroke-width="2" marker-end="url(#arrow)"/>')
        parts.append(_box(LEFT, y, upstream, "upstream"))
    for i, link in enumerate(replicas):
        y = _y(i, len(replicas), rows)
        state = str(link.get("state", ""))
        colour = COLOURS.get(state, "#5c6678")
        dash = ' stroke-dasharray="6 4"' if state == "paused" else ""
        parts.append(f'<line x1="{MIDDLE + BOX_W}" y1="{centre + BOX_H // 2}" x2="{RIGHT}" y2="{y + BOX_H // 2}" '
                     f'stroke="{colour}" stroke-width="3"{dash} marker-end="url(#arrow)"/>')
        label = f"{state} · {link.get('lag_messages', 0)} behind"
        parts.append(f'<text x="{(MIDDLE + BOX_W + RIGHT) // 2}" y="{(centre + y + BOX_H) // 2 - 8}" font-size="12" '
                     f'text-anchor="middle" fill="{colour}" class="link-label">{escape(label)}</text>')
        parts.append(_box(RIGHT, y, str(link.get("replica", "")), f"replica on {link.get('cluster') or 'unknown cluster'}"))
    summary = (f"Stream {path}: {len(upstreams)} upstream(s), "
               + ", ".join(f"replica {r.get('replica')} {r.get('state')} {r.get('lag_messages', 0)} behind"
                           for r in replicas) if replicas else f"Stream {path}: no replicas")
    return Markup(
        f'<svg id="topology" role="img" aria-labelledby="topology-title" viewBox="0 0 {WIDTH} {height}" '
        f'width="100%" preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg">'
        f'<title id="topology-title">{escape(summary)}</title>'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#5c6678"/></marker></defs>'
        + "".join(parts) + "</svg>")
