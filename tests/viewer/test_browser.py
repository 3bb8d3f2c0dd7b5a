"""``duplexsim view`` pages in a real headless browser: lanes drawn, players loaded, click to seek,
playback moves the playhead, the index sorts and filters. Saves screenshots of a session page and
the index of a small demo run to $DUPLEXSIM_ARTIFACTS (default tests/artifacts/).

Needs Chromium and its driver (Debian: ``apt-get install chromium chromium-driver``) and selenium
(the ``dev`` extra); skipped with the reason when any is missing. Selenium Manager is never used,
so nothing is downloaded: the driver and browser paths are explicit. Override them with
$DUPLEXSIM_CHROMEDRIVER and $DUPLEXSIM_CHROMIUM.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from duplexsim.core.audio import audio_info
from duplexsim.runscores.score import score_run
from duplexsim.scoring.service.api import open_scoring
from duplexsim.session import eventloop
from duplexsim.viewer import write_view
from tests.helpers.paths import REPO
from tests.helpers.sessions import settings
from tests.helpers.views import add_failed_row, record_run

CHROMIUM = os.environ.get("DUPLEXSIM_CHROMIUM") or shutil.which("chromium")
CHROMEDRIVER = os.environ.get("DUPLEXSIM_CHROMEDRIVER") or shutil.which("chromedriver")
ARTIFACTS = Path(os.environ.get("DUPLEXSIM_ARTIFACTS", REPO / "tests" / "artifacts"))
DEMO_SAMPLES = ("tl-anger-1", "it-pride-1")  # the two shortest demo contexts (8.8 s)
SETTINGS = settings(max_reply_s=3.0, reply_timeout_s=3.0, deadline_margin_s=10.0)
USER_RGB, MODEL_RGB = (37, 99, 235), (234, 88, 12)  # --user and --model in the stylesheet

webdriver = pytest.importorskip(
    "selenium.webdriver", reason="selenium is not installed (pip install -e '.[dev]')"
)
if not CHROMIUM or not CHROMEDRIVER:
    pytest.skip(
        "no headless browser: needs chromium and chromedriver on PATH "
        "(Debian: apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def view(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two demo samples against the echo model, scored with the offline prosody scorer, and a
    failed session without a recording; returns the folder of the pages."""
    root = tmp_path_factory.mktemp("browser")
    run = root / "runs" / "demo-view"

    async def make() -> None:
        await record_run(
            run,
            REPO / "recordings" / "demo",
            DEMO_SAMPLES,
            settings=SETTINGS,
            server_hangover_s=None,  # the fake's own, longer than the pauses between A's turns
        )
        add_failed_row(run, "zz-failed", "cannot connect to ws://127.0.0.1:1 (refused)")
        scoring = open_scoring(None)
        try:
            await score_run(
                run, "prosody", lambda clips: scoring.score(clips, "prosody", deadline_s=120)
            )
        finally:
            await scoring.aclose()

    eventloop.run(make())
    out = root / "view"
    write_view(run, out)
    return out


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--autoplay-policy=no-user-gesture-required",
        "--mute-audio",
        "--hide-scrollbars",
        "--window-size=1360,1000",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(arg)
    profile = tempfile.mkdtemp(prefix="duplexsim-chromium-")
    options.add_argument(f"--user-data-dir={profile}")
    service = webdriver.ChromeService(executable_path=str(CHROMEDRIVER))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SE_OFFLINE", "true")  # Selenium Manager must never reach the network
        browser = webdriver.Chrome(service=service, options=options)
    try:
        yield browser
    finally:
        browser.quit()
        shutil.rmtree(profile, ignore_errors=True)


def open_page(driver: Any, path: Path) -> None:
    driver.get(path.as_uri())
    WebDriverWait(driver, 10).until(
        lambda d: d.execute_script(
            "return Array.from(document.querySelectorAll('audio')).every(a => a.readyState >= 1)"
        )
    )


def js_errors(driver: Any) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


COUNT_COLOUR = """
const [id, r, g, b] = arguments;
const c = document.getElementById(id);
const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
let n = 0;
for (let i = 0; i < px.length; i += 4) {
  if (Math.abs(px[i] - r) + Math.abs(px[i + 1] - g) + Math.abs(px[i + 2] - b) < 30 && px[i + 3] > 200) n++;
}
return n;
"""


def test_session_page_draws_both_lanes_and_loads_three_players(driver, view):
    page = view / "sessions" / "tl-anger-1.html"
    open_page(driver, page)
    assert driver.title.startswith("tl-anger-1")
    assert driver.execute_script(COUNT_COLOUR, "lane-user", *USER_RGB) > 1000
    assert driver.execute_script(COUNT_COLOUR, "lane-model", *MODEL_RGB) > 1000
    for strip in ("axis", "events", "traffic", "overlay"):
        assert driver.execute_script(
            "const c = document.getElementById(arguments[0]);"
            "return c.getContext('2d').getImageData(0, 0, c.width, c.height).data"
            ".some((v, i) => i % 4 === 3 && v > 0)",
            strip,
        ), f"{strip} is blank"
    durations = driver.execute_script(
        "return Object.fromEntries(Array.from(document.querySelectorAll('audio'))"
        ".map(a => [a.dataset.track, a.duration]))"
    )
    bundle = view.parent / "runs" / "demo-view" / "sessions" / "tl-anger-1"
    user = audio_info(bundle / "input.wav").duration_s
    model = audio_info(bundle / "output.wav").duration_s
    assert durations["user"] == pytest.approx(user, abs=0.01)
    assert durations["model"] == pytest.approx(model, abs=0.01)
    assert durations["both"] == pytest.approx(max(user, model), abs=0.01)
    assert js_errors(driver) == []


def test_a_page_too_long_to_embed_plays_the_run_folders_files(driver, view):
    run = view.parent / "runs" / "demo-view"
    page = write_view(run, view.parent / "linked", sample="tl-anger-1", max_embed_s=1.0)
    assert "data:audio" not in page.read_text(encoding="utf-8")
    open_page(driver, page)
    assert driver.find_element(By.ID, "audio-linked").is_displayed()
    assert driver.execute_script(COUNT_COLOUR, "lane-user", *USER_RGB) > 1000
    assert driver.execute_script(COUNT_COLOUR, "lane-model", *MODEL_RGB) > 1000
    durations = driver.execute_script(
        "return Object.fromEntries(Array.from(document.querySelectorAll('audio'))"
        ".map(a => [a.dataset.track, a.duration]))"
    )
    bundle = run / "sessions" / "tl-anger-1"
    for track, name in (("user", "input.wav"), ("model", "output.wav"), ("both", "stereo.wav")):
        assert durations[track] == pytest.approx(audio_info(bundle / name).duration_s, abs=0.01)
    lane = driver.find_element(By.ID, "lane-model")
    ActionChains(driver).move_to_element_with_offset(lane, 0, 0).click().perform()  # the middle
    expected = driver.execute_script("return window.duplexsimView.duration") / 2
    assert player_times(driver) == pytest.approx([expected] * 3, abs=0.05)
    assert js_errors(driver) == []


def player_times(driver: Any) -> list[float]:
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('audio')).map(a => a.currentTime)"
    )


def playhead_x(driver: Any) -> float:
    return driver.execute_script(
        "return document.getElementById('playhead').getBoundingClientRect().left + 1"
        " - document.getElementById('over').getBoundingClientRect().left"
    )


def test_click_on_a_lane_seeks_every_player_and_the_playhead(driver, view):
    open_page(driver, view / "sessions" / "tl-anger-1.html")
    lane = driver.find_element(By.ID, "lane-model")
    width = lane.size["width"]
    duration = driver.execute_script("return window.duplexsimView.duration")
    for share in (0.3, 0.75):
        offset = round(share * width - width / 2)  # from the lane's centre
        ActionChains(driver).move_to_element_with_offset(lane, offset, 0).click().perform()
        expected = (width / 2 + offset) / width * duration
        assert player_times(driver) == pytest.approx([expected] * 3, abs=0.03)
        assert playhead_x(driver) == pytest.approx(width / 2 + offset, abs=2)
        clock = driver.find_element(By.ID, "clock").text
        assert float(clock.split(" s")[0]) == pytest.approx(expected, abs=0.03)
    # a seek in one player's own control moves the others and the playhead with it
    driver.execute_script("document.querySelector('audio[data-track=model]').currentTime = 2.0")
    WebDriverWait(driver, 5).until(
        lambda d: (
            all(abs(t - 2.0) < 0.01 for t in player_times(d))
            and abs(d.execute_script("return window.duplexsimView.time()") - 2.0) < 0.01
        )
    )


def test_playback_moves_the_playhead(driver, view):
    open_page(driver, view / "sessions" / "tl-anger-1.html")
    lane = driver.find_element(By.ID, "lane-user")
    ActionChains(driver).move_to_element_with_offset(
        lane, -lane.size["width"] // 4, 0
    ).click().perform()
    start, x0 = driver.execute_script("return window.duplexsimView.time()"), playhead_x(driver)
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "document.querySelector('audio[data-track=both]').play()"
        ".then(() => done('playing'), (e) => done(String(e)));"
    )
    assert result == "playing"
    time.sleep(0.6)
    states = driver.execute_script(
        "const a = Array.from(document.querySelectorAll('audio'));"
        "const s = a.map(p => [p.dataset.track, p.paused]); a.forEach(p => p.pause()); return s;"
    )
    now = driver.execute_script("return window.duplexsimView.time()")
    assert now > start + 0.2
    assert playhead_x(driver) > x0 + 5
    assert dict(states) == {"user": True, "model": True, "both": False}  # one player at a time


def test_screenshots_of_a_demo_session_and_the_index(driver, view):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for page, name in (
        (view / "sessions" / "tl-anger-1.html", "session-page.png"),
        (view / "index.html", "index-page.png"),
    ):
        driver.set_window_size(1360, 600)
        open_page(driver, page)
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(1360, min(height + 130, 4000))  # + the window's own chrome
        if name == "session-page.png":  # the playhead at the model's onset
            driver.execute_script(
                "const d = JSON.parse(document.getElementById('session-data').textContent);"
                "window.duplexsimView.seek(d.timing.onset)"
            )
        time.sleep(0.3)
        assert driver.save_screenshot(str(ARTIFACTS / name))
        assert (ARTIFACTS / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    driver.set_window_size(1360, 1000)


def visible_ids(driver: Any) -> list[str]:
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#sessions tbody tr'))"
        ".filter(r => !r.hidden).map(r => r.cells[0].textContent)"
    )


def test_index_sorts_filters_and_links(driver, view):
    open_page(driver, view / "index.html")
    assert visible_ids(driver) == ["it-pride-1", "tl-anger-1", "zz-failed"]
    latency = dict(
        driver.execute_script(
            "return Array.from(document.querySelectorAll('#sessions tbody tr'))"
            ".map(r => [r.cells[0].textContent, parseFloat(r.cells[5].dataset.v)])"
        )
    )
    assert latency["zz-failed"] is None  # NaN: a failed session has no latency
    header = driver.find_element(By.XPATH, "//th[normalize-space()='latency (ms)']")
    for ascending in (True, False):
        header.click()
        ids = visible_ids(driver)
        values = [latency[i] for i in ids[:-1]]
        assert ids[-1] == "zz-failed"  # blanks last, either way
        assert values == sorted(values, reverse=not ascending)
        sort = header.get_attribute("aria-sort")
        assert sort == ("ascending" if ascending else "descending")
    driver.find_element(By.XPATH, "//th[normalize-space()='sample']").click()
    assert visible_ids(driver) == ["it-pride-1", "tl-anger-1", "zz-failed"]

    box = driver.find_element(By.ID, "filter")
    box.send_keys("pride")  # the failed row's emotion is Pride too
    assert visible_ids(driver) == ["it-pride-1", "zz-failed"]
    Select(driver.find_element(By.CSS_SELECTOR, "select[data-field=status]")).select_by_value(
        "failed"
    )
    assert visible_ids(driver) == ["zz-failed"]
    assert driver.find_element(By.ID, "count").text == "1 of 3 sessions"
    box.clear()
    Select(driver.find_element(By.CSS_SELECTOR, "select[data-field=status]")).select_by_value("")
    box.send_keys(" ")  # clear() fires no input event
    assert len(visible_ids(driver)) == 3

    driver.find_element(By.LINK_TEXT, "tl-anger-1").click()
    WebDriverWait(driver, 10).until(lambda d: d.title.startswith("tl-anger-1"))
    assert js_errors(driver) == []
