"""Headless Chromium for the tests that open forge's pages in a real browser (Debian's
chromium and chromium-driver packages; the test is skipped where they are not installed)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def headless_chromium(downloads: Path | None = None, console_log: bool = False) -> Any:
    """A selenium driver of headless Chromium; ``downloads`` receives downloads without a prompt,
    ``console_log`` keeps the page's console for ``driver.get_log("browser")``."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = shutil.which("chromedriver")
    if not (chromium and chromedriver):
        pytest.skip("Chromium and chromedriver are not installed (Debian packages chromium, chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in FLAGS:
        opts.add_argument(flag)
    if downloads is not None:
        opts.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                               "download.prompt_for_download": False})
    if console_log:
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(chromedriver), options=opts)
