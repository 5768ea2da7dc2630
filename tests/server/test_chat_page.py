"""The chat page at GET / in headless Chromium (Debian's chromium + chromium-driver, via selenium):
type a message, see the reply stream in, press stop; a screenshot for the README."""
import os
import shutil
import time
from pathlib import Path

import pytest
import requests

from conftest import ROOT

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture()
def browser():
    if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
        pytest.fail("chromium and chromium-driver are needed (scripts/install-deps.sh installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1100,760"):
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service(DRIVER), options=opts)
    yield d
    d.quit()


def test_page_is_served_without_external_resources(server):
    r = requests.get(server.url + "/")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    assert "<select id=\"model\">" in r.text
    assert "http://" not in r.text and "https://" not in r.text  # no CDN


def test_chat_page_streams_and_stops(server, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    browser.get(server.url + "/")
    wait = WebDriverWait(browser, 60, poll_frequency=0.02)
    wait.until(lambda d: len(Select(d.find_element(By.ID, "model")).options) == 2)
    picker = Select(browser.find_element(By.ID, "model"))
    assert [o.get_attribute("value") for o in picker.options] == ["stories260K", "chat"]

    # The shipped model, as a text completion: the reply streams in and finishes.
    picker.select_by_value("stories260K")
    browser.find_element(By.ID, "max_tokens").clear()
    browser.find_element(By.ID, "max_tokens").send_keys("120")
    box = browser.find_element(By.ID, "input")
    box.send_keys("Once upon a time")
    browser.find_element(By.ID, "send").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".assistant[data-state=done]"))
    reply = browser.find_element(By.CSS_SELECTOR, ".assistant[data-state=done]").text
    assert len(reply) > 100
    assert "tokens/s" in browser.find_element(By.ID, "stats").text
    assert browser.find_element(By.CSS_SELECTOR, ".user").text == "Once upon a time"
    # KILN_SERVE_SCREENSHOT=docs/img/serve_chat.png refreshes the README's picture.
    shot = Path(os.environ.get("KILN_SERVE_SCREENSHOT", tmp_path / "serve_chat.png"))
    if not shot.is_absolute():
        shot = ROOT / shot
    shot.parent.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(shot))

    # The chat model, a long reply: stop while it streams; the slot comes back.
    picker.select_by_value("chat")
    browser.find_element(By.ID, "max_tokens").clear()
    browser.find_element(By.ID, "max_tokens").send_keys("1900")
    # A random-weight model may sample its end token within its first tokens, and a tiny one
    # streams faster than a test polls: the stop button is pressed from the page itself the
    # moment the reply's first text arrives (a MutationObserver), and a reply that ended before
    # that is asked again, from a cleared conversation (a growing history would overflow the
    # context, and an error reply is no longer an .assistant element).
    press_stop_on_first_text = """
        const log = document.getElementById('log'), stop = document.getElementById('stop');
        const obs = new MutationObserver(() => {
          const a = log.lastElementChild;
          if (a && a.dataset.state === 'streaming' && a.textContent.length > 0 && !stop.disabled) {
            obs.disconnect();
            stop.click();
          }
        });
        obs.observe(log, {subtree: true, childList: true, characterData: true});
        window.__stopObserver = obs;"""
    last = "const a = document.getElementById('log').lastElementChild; return [a.className, a.dataset.state || '', a.textContent]"
    ended = []
    for _ in range(5):
        browser.find_element(By.ID, "clear").click()
        browser.execute_script(press_stop_on_first_text)
        box.send_keys("Tell me a long story")
        browser.find_element(By.ID, "send").click()
        try:
            wait.until(lambda d: d.find_element(By.ID, "log").find_elements(By.CSS_SELECTOR, ".assistant, .error") and
                       d.execute_script(last)[1] not in ("", "streaming"))
        except Exception as e:
            raise AssertionError("the chat reply did not end; the log's last entry: %r" % (browser.execute_script(last),)) from e
        browser.execute_script("if (window.__stopObserver) window.__stopObserver.disconnect();")
        cls, state, text = browser.execute_script(last)
        if state == "stopped":
            break
        ended.append((cls, state, text[:80]))
    else:
        pytest.fail("five replies of the chat model ended before they could be stopped: %r" % ended)
    assert browser.find_elements(By.CSS_SELECTOR, ".assistant")[-1].text.endswith("[stopped]")
    deadline = time.time() + 10
    while time.time() < deadline and server.health()["models"]["chat"]["busy"] != 0:
        time.sleep(0.05)
    assert server.health()["models"]["chat"]["busy"] == 0


def test_no_key_banner_leaves_once_a_key_works(start_server, browser):
    """With --api-key, the page says a key is needed; once a key works the banner goes."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait
    from conftest import STORIES

    s = start_server("--model", f"stories260K={STORIES}", "--api-key", "page-key", "--parallel", "1")
    browser.get(s.url + "/")
    wait = WebDriverWait(browser, 30, poll_frequency=0.02)
    banner = browser.find_element(By.ID, "banner")
    wait.until(lambda d: banner.is_displayed())
    assert "API key" in banner.text
    key = browser.find_element(By.ID, "key")
    key.send_keys("wrong-key", Keys.TAB)  # a change event: the models are asked again
    wait.until(lambda d: "not valid" in banner.text)
    assert banner.is_displayed()
    key.clear()
    key.send_keys("page-key", Keys.TAB)
    wait.until(lambda d: not banner.is_displayed())
    wait.until(lambda d: len(Select(d.find_element(By.ID, "model")).options) == 1)
    box = browser.find_element(By.ID, "input")
    box.send_keys("Once upon a time")
    browser.find_element(By.ID, "send").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".assistant[data-state=done]"))
    assert not banner.is_displayed()
    assert not browser.find_elements(By.CSS_SELECTOR, ".error")


def test_code_fences_render_as_code(server, browser):
    """A reply's ``` fences become <pre><code> with the text escaped. The tiny test models do not
    write fences, so the page's fetch of the completion is answered by a stream made in the page
    (the same SSE chunks kiln serve sends); the rest is the page's own code."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    browser.get(server.url + "/")
    wait = WebDriverWait(browser, 30, poll_frequency=0.02)
    wait.until(lambda d: len(Select(d.find_element(By.ID, "model")).options) == 2)
    Select(browser.find_element(By.ID, "model")).select_by_value("chat")
    reply = "Here:\n```html\n<b>bold</b> & <script>window.__pwned = 1</script>\nline 2\n```\nDone <i>x</i>."
    browser.execute_script("""
        const reply = arguments[0], realFetch = window.fetch;
        window.fetch = (url, opts) => {
          if (!String(url).endsWith('/chat/completions')) return realFetch(url, opts);
          const enc = new TextEncoder();
          const events = [];
          for (let i = 0; i < reply.length; i += 7)  // pieces that split the fences too
            events.push({choices: [{index: 0, delta: {content: reply.slice(i, i + 7)}, finish_reason: null}]});
          events.push({choices: [{index: 0, delta: {}, finish_reason: 'stop'}]});
          const body = new ReadableStream({start(c) {
            for (const e of events) c.enqueue(enc.encode('data: ' + JSON.stringify(e) + '\\n\\n'));
            c.enqueue(enc.encode('data: [DONE]\\n\\n'));
            c.close();
          }});
          return Promise.resolve(new Response(body, {status: 200, headers: {'Content-Type': 'text/event-stream'}}));
        };""", reply)
    browser.find_element(By.ID, "input").send_keys("show me code")
    browser.find_element(By.ID, "send").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".assistant[data-state=done]"))
    out = browser.find_element(By.CSS_SELECTOR, ".assistant[data-state=done]")
    codes = out.find_elements(By.CSS_SELECTOR, "pre > code")
    assert len(codes) == 1
    assert codes[0].get_attribute("class") == "language-html"
    assert codes[0].get_attribute("textContent") == "<b>bold</b> & <script>window.__pwned = 1</script>\nline 2"
    # Escaped: no element came from the reply's text, and the script did not run.
    assert not out.find_elements(By.CSS_SELECTOR, "b, i, script")
    assert browser.execute_script("return window.__pwned === undefined")
    text = out.get_attribute("textContent")
    assert text.startswith("Here:") and text.endswith("Done <i>x</i>.") and "```" not in text
