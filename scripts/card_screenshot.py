#!/usr/bin/env python3
"""An Adaptive Card as a person sees it: rendered by Microsoft's renderer (the
``adaptivecards`` npm package, node_modules/) in headless Chromium, with the text and the
buttons it shows and the renderer's own complaints about the card's JSON.

    python scripts/card_screenshot.py --api-url http://127.0.0.1:7071 --run r-... \\
        --out docs/img/teams-result-card.png

draws the result card the Teams bot posts for that run (core.chat.action_cards.run_card).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RENDERER = ROOT / "node_modules" / "adaptivecards" / "dist" / "adaptivecards.min.js"
CHROMIUM = "/usr/bin/chromium"
# Teams' look, as far as a host config says it: its font, spacing and accent colour.
HOST_CONFIG: dict[str, Any] = {
    "fontFamily": "'Segoe UI', 'Helvetica Neue', Arial, sans-serif",
    "spacing": {"small": 4, "default": 8, "medium": 16, "large": 20, "padding": 16},
    "supportsInteractivity": True,
    "actions": {"maxActions": 6, "buttonSpacing": 8, "actionsOrientation": "horizontal"},
    "containerStyles": {
        "default": {
            "backgroundColor": "#FFFFFF",
            "foregroundColors": {
                "default": {"default": "#242424", "subtle": "#616161"},
                "accent": {"default": "#5B5FC7"},
                "good": {"default": "#237B4B"},
                "warning": {"default": "#C4314B"},
                "attention": {"default": "#C4314B"},
            },
        }
    },
}
PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><style>
body {{ margin: 0; padding: 16px; background: #F5F5F5; }}
#card {{ width: {width}px; background: #FFFFFF; border-radius: 6px;
        box-shadow: 0 1px 3px rgba(0,0,0,.2); overflow: hidden; }}
.ac-pushButton {{ font: 600 13px 'Segoe UI', Arial, sans-serif; padding: 6px 12px;
        border: 1px solid #D1D1D1; border-radius: 4px; background: #FFFFFF; color: #242424; }}
</style><script>{renderer}</script></head><body><div id="card"></div><script>
const card = new AdaptiveCards.AdaptiveCard();
card.hostConfig = new AdaptiveCards.HostConfig({host});
const context = new AdaptiveCards.SerializationContext();
card.parse({card}, context);
window.cardEvents = [];
for (let i = 0; i < context.eventCount; i++) {{
  const e = context.getEventAt(i);
  window.cardEvents.push(e.message);
}}
document.getElementById("card").appendChild(card.render());
</script></body></html>"""


@dataclass
class Rendered:
    text: str  # what the card shows, as the page's innerText
    buttons: list[str]
    complaints: list[str]  # the renderer's parse events (unknown types, bad values)


def render(card: dict[str, Any], out: Path, *, width: int = 520) -> Rendered:
    return render_all([(card, out)], width=width)[0]


def render_all(cards: list[tuple[dict[str, Any], Path]], *, width: int = 520) -> list[Rendered]:
    """Each card drawn to its PNG, in one browser."""
    from playwright.sync_api import sync_playwright

    shown = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"], headless=True
        )
        try:
            for card, out in cards:
                shown.append(_draw(browser, card, out, width))
        finally:
            browser.close()
    return shown


def _draw(browser: Any, card: dict[str, Any], out: Path, width: int) -> Rendered:
    page_html = PAGE.format(
        width=width,
        renderer=RENDERER.read_text(),
        host=json.dumps(HOST_CONFIG),
        card=json.dumps(card),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": width + 32, "height": 800})
    try:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.set_content(page_html)
        if errors:
            raise RuntimeError(f"the renderer failed: {errors}")
        element = page.locator("#card")
        element.screenshot(path=str(out))
        return Rendered(
            text=element.inner_text(),
            buttons=[b.inner_text() for b in page.locator(".ac-pushButton").all()],
            complaints=list(page.evaluate("window.cardEvents")),
        )
    finally:
        page.close()


def main(argv: list[str] | None = None) -> int:
    import httpx

    from core.chat.action_cards import run_card
    from core.models.views import RunView

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--api-url", required=True)
    ap.add_argument("--run", required=True, help="the run whose result card to draw")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--public-url", help="the links' base (default: --api-url)")
    a = ap.parse_args(argv)
    r = httpx.get(f"{a.api_url.rstrip('/')}/api/runs/{a.run}", timeout=30)
    if r.status_code != 200:
        print(f"error: --run: {r.status_code} {r.text[:200]}", file=sys.stderr)
        return 2
    card = run_card(RunView.model_validate(r.json()), (a.public_url or a.api_url).rstrip("/"))
    shown = render(card.model_dump(mode="json"), a.out)
    print(shown.text)
    print("buttons:", ", ".join(shown.buttons))
    if shown.complaints:
        print("renderer:", "; ".join(shown.complaints), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
