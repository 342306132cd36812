"""Pages in real headless Chromium (Debian's ``chromium``; ``.ci/run`` installs it), driven over
the DevTools protocol: open a page, wait until it has loaded, and report its console errors,
uncaught exceptions, failed requests and images that did not load."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


IMAGES = """(() => { const imgs = [...document.images];
  return {n: imgs.length, broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0))
          .map(i => i.getAttribute('src').slice(0, 80)), ready: document.readyState}; })()"""


CUT_OFF = """(() => { const out = [];
  for (const el of document.querySelectorAll('body *')) {
    if (el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1)
      out.push(`${el.tagName}#${el.id} ${el.scrollWidth} > ${el.clientWidth}: `
               + (el.textContent || '').slice(0, 80));
  }
  const d = document.documentElement;
  if (d.scrollWidth > d.clientWidth + 1) out.push(`page ${d.scrollWidth} > ${d.clientWidth}`);
  return out; })()"""


class Page:
    """One page open in a fresh headless Chromium (its own empty profile)."""

    def __init__(self, url: str, timeout: float = 120):
        from websockets.sync.client import connect

        self.profile = tempfile.mkdtemp(prefix="chromium-")
        self.proc = subprocess.Popen(
            [chromium(), *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + timeout
        ws_url = None
        while ws_url is None:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited ({self.proc.returncode}) before DevTools")
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            ws_url = m.group(1) if m else None
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not start DevTools")
        self.ws = connect(ws_url, max_size=None, open_timeout=timeout)
        self.timeout = timeout
        self._id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target,
                                 flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=True)
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("Page.loadEventFired")

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv(timeout=self.timeout))
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, event: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not any(e.get("method") == event for e in self.events):
            left = max(1.0, deadline - time.monotonic())
            self.events.append(json.loads(self.ws.recv(timeout=left)))

    def evaluate(self, expression: str) -> Any:
        res = self.call("Runtime.evaluate", session=True, expression=expression,
                        returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression[:60]}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def images(self) -> dict[str, Any]:
        """Images of the page once every one has finished loading (or failed)."""
        deadline = time.monotonic() + self.timeout
        while True:
            state = self.evaluate(IMAGES.replace("imgs.filter(i => !(i.complete && "
                                                 "i.naturalWidth > 0))", "imgs.filter(i => "
                                                 "!i.complete)"))
            if (not state["broken"] and state["ready"] == "complete") or (
                    time.monotonic() > deadline):
                return self.evaluate(IMAGES)
            time.sleep(0.2)

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed requests seen so far."""
        self.evaluate("1")  # flush events that arrived before now
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(f"exception: {p['exceptionDetails'].get('text')} "
                           f"{p['exceptionDetails'].get('exception', {}).get('description', '')}")
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.error: " + " ".join(str(a.get("value", a.get("description")))
                                                        for a in p.get("args", [])))
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
            elif m == "Network.loadingFailed" and not p.get("canceled"):
                out.append(f"request failed: {p.get('errorText')}")
        return out

    def cut_off(self, width: int = 1280) -> list[str]:
        """At a viewport ``width`` px wide: every element whose content is wider than its box
        (its scroll width exceeds its width: text cut off or hidden behind a scroll bar), and
        the page itself when it is wider than the viewport; [] when everything fits."""
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width,
                  height=1000, deviceScaleFactor=1, mobile=False)
        return self.evaluate(CUT_OFF)

    def screenshot(self, path: Path, width: int = 1400, height: int = 2000) -> Path:
        import base64

        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width,
                  height=height, deviceScaleFactor=1, mobile=False)
        data = self.call("Page.captureScreenshot", session=True, format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Page:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
