"""The web page on a phone's width, in a real Chromium (newcomer14): the Memory tab's search results, seven
columns side by side, ran off the right edge with the text column a few pixels wide (each row a tower of
single letters); and the view buttons were plain buttons, so a screen reader could not tell which view was
shown. Now a table row is a card of "column: value" lines on a narrow screen, and the buttons are tabs."""

from __future__ import annotations

from tests.channels.browser import ARTIFACTS, BROWSER_MODULE, say, signed_in

pytestmark = BROWSER_MODULE

WIDTH = 390  # a phone


async def test_search_results_fit_a_phone_and_the_views_are_tabs_a_screen_reader_can_tell_apart() -> None:
    async with signed_in(WIDTH, 844) as session:
        page = session.page
        await page.wait_for_selector("#engine-status.up")
        await say(page, "the spare key of the shed is under the blue flower pot by the door", 1)

        tabs = page.get_by_role("tab")
        assert await tabs.count() == 4
        assert await page.get_by_role("tab", selected=True).inner_text() == "Chat"
        await page.get_by_role("tab", name="Memory").click()
        assert await page.get_by_role("tab", selected=True).inner_text() == "Memory"
        assert await page.get_by_role("tabpanel", name="Memory").is_visible()

        await page.fill("#search-text", "spare key")
        await page.press("#search-text", "Enter")
        text = page.locator("#search-results td.text", has_text="blue flower pot").first
        await text.wait_for()
        await page.screenshot(path=str(ARTIFACTS / "web-memory-phone.png"), full_page=True)
        box = await text.bounding_box()
        assert box is not None
        assert box["x"] >= 0 and box["x"] + box["width"] <= WIDTH, box  # on the screen, not past its edge
        assert box["width"] > WIDTH / 2, box  # the text has the card's width, not a sliver of it
        assert box["height"] < 150, box  # a few lines, not a letter a line
        score = page.locator("#search-results td.num").first
        assert (await score.get_attribute("data-label")) == "score"  # each value says which column it is
        messages = page.locator("#segments td[data-label=messages]").first  # the segments' table too
        await messages.wait_for()
        box = await messages.bounding_box()
        assert box is not None and box["x"] + box["width"] <= WIDTH, box
