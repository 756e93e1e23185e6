"""A whole HTML document, for the report, `hoplab trend -o FILE.html` and the dashboard,
and what a self-contained file carries packed: the one copy of plotly.js, flame graphs.

A file that must open offline inlines plotly.js, 4.8 MB as the plotly package ships
it, and each profiled run's flame graph, an SVG of up to a megabyte or more. Both
compress about tenfold, so they are inlined gzip-compressed and base64-encoded
(plotly.js 1.9 MB) and the browser inflates them with its own DecompressionStream:
plotly.js before the first chart is drawn (html.DRAW_JS waits for it), a flame graph
when it scrolls into view, as the charts are drawn. The page itself is readable
before either (eighteen profiled runs made a 28.6 MB report that took 28 s to load;
packed and drawn on sight, 4.7 MB, bench/render.py).
"""

from __future__ import annotations

import base64
import functools
import gzip

from hoplab.render.html import CSS, DRAW_JS, Html, esc

# Inflates the packed bundle and runs it as a script of the page; hoplabReady resolves
# once window.Plotly exists. A blob: URL keeps the file free of any network fetch.
_UNPACK_JS = """
function hoplabUnpack(b64) {
  // A data: URL decodes base64 natively, far faster than atob and a loop in script.
  return fetch('data:application/gzip;base64,' + b64).then(r => new Response(
    r.body.pipeThrough(new DecompressionStream('gzip'))).blob());
}
function hoplabShowSvg(el) {
  hoplabUnpack(document.getElementById(el.dataset.packed).textContent).then(svg => {
    const o = document.createElement('object');
    o.type = 'image/svg+xml'; o.className = el.className; o.width = '100%';
    o.height = el.dataset.height;
    o.data = URL.createObjectURL(new Blob([svg], {type: 'image/svg+xml'}));
    el.replaceWith(o);
  });
}
document.addEventListener('DOMContentLoaded', () => {
  const svgs = document.querySelectorAll('[data-packed]');
  if (!('IntersectionObserver' in window)) { svgs.forEach(hoplabShowSvg); return; }
  const view = new IntersectionObserver(seen => {
    for (const e of seen) {
      if (e.isIntersecting) { view.unobserve(e.target); hoplabShowSvg(e.target); }
    }
  }, {rootMargin: '300px 0px'});
  svgs.forEach(el => view.observe(el));
});
window.hoplabReady = hoplabUnpack(document.getElementById('hoplab-plotly').textContent)
  .then(js => new Promise((done, fail) => {
    const s = document.createElement('script');
    s.src = URL.createObjectURL(new Blob([js], {type: 'text/javascript'}));
    s.onload = () => done(); s.onerror = () => fail(new Error('plotly.js did not load'));
    document.head.append(s);
  }));
"""


@functools.cache
def plotly_js() -> str:
    """The plotly.js bundle the installed plotly ships (no CDN, no network)."""
    from plotly.offline import get_plotlyjs

    text: str = get_plotlyjs()
    # Inline in <script>, a "</script" inside would end the bundle early.
    return text.replace("</script", "<\\/script")


@functools.cache
def _packed_plotly() -> str:
    # mtime 0: the same bundle packs to the same bytes, so two reports of the same runs
    # are the same file.
    return pack(plotly_js())


def pack(text: str) -> str:
    """`text` gzip-compressed and base64-encoded, for hoplabUnpack."""
    return base64.b64encode(gzip.compress(text.encode(), 6, mtime=0)).decode()


def packed_svg(element_id: str, svg: str, cls: str, height: int) -> Html:
    """An SVG (a flame graph: interactive, so drawn in an <object>) carried packed in the
    page and shown when it scrolls into view; `height` in pixels, kept before it is."""
    data = f"{element_id}-data"
    return Html(f'<div class="{esc(cls)}" data-packed="{esc(data)}" data-height="{height}" '
                f'style="height:{height}px"></div><script type="application/gzip;base64" '
                f'id="{esc(data)}">{pack(svg)}</script>')


def standalone_scripts() -> str:
    """The <script>s of a self-contained page with charts: plotly.js once, packed, and
    the drawing code."""
    return (f'<script type="application/gzip;base64" id="hoplab-plotly">{_packed_plotly()}'
            f"</script><script>{_UNPACK_JS}</script><script>{DRAW_JS}</script>")


def page(title: str, body: str, head: str = "") -> str:
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><meta name=\"viewport\" "
            f"content=\"width=device-width\"><style>{CSS}</style>{head}</head>"
            f"<body>{body}</body></html>")
