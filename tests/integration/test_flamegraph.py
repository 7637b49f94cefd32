#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""flame.svg as a user sees it: cgprofd profiles the test workload (5:3:2 in
hot_alpha/hot_beta/hot_gamma) at 999 Hz with the folded, JSON and SVG
formats, and headless Chromium renders the flame graph. Through the DOM of
the rendered SVG: hot_alpha is drawn about half as wide as the root, as wide
as profile.folded says, hovering shows its samples, cgprofSearch() highlights
it and returns its share, zooming fills the width with it. The SVG loads
nothing from anywhere (no URLs, and the test's HTTP server sees only the
page and the SVG), and a screenshot of it renders."""

import html
import http.server
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import threading
import xml.etree.ElementTree as ET

from cgproflib import (BUILD, Agent, Cgroup, HOT, folded, log, main, profile, skip_prereq, workload)

# The test page: loads flame.svg (same origin, so its DOM and functions are
# reachable), measures and exercises it, and writes the results as JSON
# into <pre id="result"> for --dump-dom.
TEST_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>cgprof flame graph test</title></head>
<body>
<iframe id="flame" src="flame.svg" width="1220" height="900"></iframe>
<pre id="result">pending</pre>
<script>
function widths(doc, name) {
  var sum = 0, n = 0;
  doc.querySelectorAll("g.frame").forEach(function (g) {
    if (g.getAttribute("data-name") === name) {
      sum += g.querySelector("rect").getBoundingClientRect().width;
      n++;
    }
  });
  return { width: sum, count: n };
}
document.getElementById("flame").addEventListener("load", function () {
  var out = document.getElementById("result"), r = {};
  try {
    var w = this.contentWindow, doc = this.contentDocument;
    var root = doc.querySelector('g.frame[data-name="all"]');
    r.title = doc.title;
    r.frames = doc.querySelectorAll("g.frame").length;
    r.rootWidth = root.querySelector("rect").getBoundingClientRect().width;
    r.rootSamples = Number(root.getAttribute("data-samples"));
    r.rootIsLowest = true;
    var rootY = root.querySelector("rect").getBoundingClientRect().top;
    doc.querySelectorAll("g.frame rect").forEach(function (e) {
      if (e.getBoundingClientRect().top > rootY) r.rootIsLowest = false;
    });
    r.hot = {};
    ["hot_alpha", "hot_beta", "hot_gamma"].forEach(function (n) { r.hot[n] = widths(doc, n); });
    // The widest hot_alpha frame: a stray stack may draw a 1-sample one too.
    var alpha = null;
    doc.querySelectorAll('g.frame[data-name="hot_alpha"]').forEach(function (g) {
      if (!alpha || Number(g.getAttribute("data-samples")) > Number(alpha.getAttribute("data-samples")))
        alpha = g;
    });
    r.alphaSamples = Number(alpha.getAttribute("data-samples"));
    var beta = doc.querySelector('g.frame[data-name="hot_beta"]');
    var searchButton = doc.getElementById("cg-search");
    r.searchButton = { text: searchButton.textContent, width: searchButton.getBoundingClientRect().width };

    // Hover: the details line.
    alpha.querySelector("rect").dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
    r.details = doc.getElementById("cg-details").textContent;

    // Search.
    r.searchType = typeof w.cgprofSearch;
    r.percent = w.cgprofSearch("hot_alpha");
    r.matches = [];
    doc.querySelectorAll("g.frame.cg-match").forEach(function (g) { r.matches.push(g.getAttribute("data-name")); });
    r.matchFill = w.getComputedStyle(alpha.querySelector("rect")).fill;
    r.otherFill = w.getComputedStyle(beta.querySelector("rect")).fill;
    r.matched = doc.getElementById("cg-matched").textContent;
    r.matchedVisible = doc.getElementById("cg-matched").getBoundingClientRect().width > 0;
    r.searchButtonAfter = searchButton.textContent;
    r.regexPercent = w.cgprofSearch("^hot_(alpha|beta)$");
    w.cgprofResetSearch();
    r.matchesAfterReset = doc.querySelectorAll("g.frame.cg-match").length;

    // Zoom: hot_alpha fills the width, its callers stay (faded), the rest hides.
    r.zoomFound = w.cgprofZoom("hot_alpha");
    var best = null;
    doc.querySelectorAll('g.frame[data-name="hot_alpha"]').forEach(function (g) {
      var width = g.querySelector("rect").getBoundingClientRect().width;
      if (!best || width > best) best = width;
    });
    r.zoomedWidth = best;
    r.rootFadedWhenZoomed = root.classList.contains("cg-parent");
    r.betaHiddenWhenZoomed = beta.getBoundingClientRect().width === 0;
    r.unzoomVisible = doc.getElementById("cg-unzoom").getBoundingClientRect().width > 0;
    w.cgprofUnzoom();
    r.hotAfterUnzoom = widths(doc, "hot_alpha");
    r.ok = true;
  } catch (e) {
    r.error = String(e) + " " + (e.stack || "");
  }
  out.textContent = JSON.stringify(r);
});
</script>
</body></html>
"""


def find_chromium():
    for c in (os.environ.get("CGPROF_CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser"),
              "/usr/bin/chromium"):
        if c and os.access(c, os.X_OK):
            return c
    skip_prereq("no chromium")


class Server:
    """http.server on 127.0.0.1 serving a directory and the test page, in a
    thread; remembers every path requested."""

    def __init__(self, directory, page):
        self.requests = []
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=directory, **kw)

            def do_GET(self):
                server.requests.append(self.path)
                if self.path == "/test.html":
                    body = page.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                super().do_GET()

            def log_message(self, *args):
                pass

        Handler.extensions_map = dict(Handler.extensions_map, **{".svg": "image/svg+xml"})
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def chromium(binary, tmp, *args):
    profile_dir = tempfile.mkdtemp(prefix="chromium-", dir=tmp)
    argv = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", f"--user-data-dir={profile_dir}", *args]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=dict(os.environ, HOME=tmp))
    if r.returncode != 0:
        raise AssertionError(f"chromium failed ({r.returncode}): {r.stderr[-3000:]}")
    return r.stdout


def check_static(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert text.startswith("<?xml"), text[:100]
    assert text.rstrip().endswith("</svg>")
    root = ET.fromstring(text.encode())  # well-formed XML
    assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
    # No network fetches: the only URLs are XML namespaces.
    urls = set(re.findall(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>)]*", text))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}, urls
    assert "<script" in text and " src=" not in text and "href" not in text
    return text


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", head
    return struct.unpack(">II", head[16:24])


def test_flamegraph_in_chromium():
    binary = find_chromium()
    cg = Cgroup(f"cgprof-test-flamegraph-{os.getpid()}")
    agent = Agent({
        "profiles": [profile(name="flame", formats=["folded", "json", "svg"])],
        "targets": [{"name": "flame-target", "profileRef": "flame", "cgroupPatterns": [cg.rel]}],
    })
    server = None
    try:
        agent.start()
        p = workload(cg, 3)
        assert p.wait(timeout=60) == 0
        cg.remove()
        report = agent.wait_summary(lambda s: s["cgroup"] == cg.rel)
        svg_path = os.path.join(report["_dir"], "flame.svg")
        assert "flame.svg" in report["files"], report["files"]
        text = check_static(svg_path)
        n_frames = text.count('<g class="frame"')
        log(f"flame.svg: {len(text)} bytes, {n_frames} frames")

        # What the folded report says hot_alpha's inclusive share is.
        stacks = folded(report)
        total = sum(stacks.values())
        assert total == report["samples"]["total"], (total, report["samples"])
        alpha_share = 100.0 * sum(c for st, c in stacks.items() if "hot_alpha" in st) / total
        log(f"folded: {total} samples, hot_alpha inclusive {alpha_share:.2f}%")

        server = Server(report["_dir"], TEST_PAGE)
        dom = chromium(binary, agent.tmp, "--virtual-time-budget=5000", "--dump-dom", f"{server.url}/test.html")
        m = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
        assert m, f"no result in the dumped DOM: {dom[-2000:]}"
        r = json.loads(html.unescape(m.group(1)))
        log("DOM:", json.dumps(r, sort_keys=True))
        assert r.get("ok"), r.get("error", r)

        # The title names the target and the session.
        assert cg.rel in r["title"] and report["session"] in r["title"], r["title"]
        assert r["rootSamples"] == total and r["rootIsLowest"], r
        assert abs(r["rootWidth"] - 1180) < 0.5, r["rootWidth"]

        # Widths: hot_alpha about half of the root, and as in profile.folded.
        shares = {n: 100.0 * r["hot"][n]["width"] / r["rootWidth"] for n in HOT}
        log("drawn shares: " + ", ".join(f"{n} {v:.2f}%" for n, v in shares.items()))
        assert abs(shares["hot_alpha"] - 50) <= 5, shares
        assert abs(shares["hot_beta"] - 30) <= 5, shares
        assert abs(shares["hot_gamma"] - 20) <= 5, shares
        assert abs(shares["hot_alpha"] - alpha_share) <= 0.5, (shares, alpha_share)

        # Hover shows the name, samples and percentage.
        assert r["alphaSamples"] > 1, r["alphaSamples"]
        assert r["details"].startswith("hot_alpha ") and f"({r['alphaSamples']} samples, " in r["details"] \
            and r["details"].endswith("%)"), (r["details"], r["alphaSamples"])

        # Search: a visible control, the function, highlights and the share.
        assert r["searchButton"]["text"] == "Search" and r["searchButton"]["width"] > 0, r["searchButton"]
        assert r["searchType"] == "function"
        assert abs(r["percent"] - alpha_share) <= 0.5, (r["percent"], alpha_share)
        assert r["matches"] and set(r["matches"]) == {"hot_alpha"}, r["matches"]
        assert r["matchFill"] == "rgb(230, 0, 230)" and r["otherFill"] != r["matchFill"], r
        assert r["matchedVisible"] and "Matched: " in r["matched"], r["matched"]
        assert f"{r['percent']:.2f}%" in r["matched"], r["matched"]
        assert r["searchButtonAfter"] == "Reset search"
        assert abs(r["regexPercent"] - (shares["hot_alpha"] + shares["hot_beta"])) <= 1, r["regexPercent"]
        assert r["matchesAfterReset"] == 0

        # Zoom and back.
        assert r["zoomFound"] and abs(r["zoomedWidth"] - 1180) < 0.5, r
        assert r["rootFadedWhenZoomed"] and r["betaHiddenWhenZoomed"] and r["unzoomVisible"], r
        assert abs(r["hotAfterUnzoom"]["width"] - r["hot"]["hot_alpha"]["width"]) < 0.01, r

        # The SVG itself: a screenshot, and nothing fetched but the page and the SVG.
        png = os.path.join(agent.tmp, "flame.png")
        chromium(binary, agent.tmp, f"--screenshot={png}", "--window-size=1200,800", "--hide-scrollbars",
                 "--virtual-time-budget=3000", f"{server.url}/flame.svg")
        assert os.path.getsize(png) > 0
        assert png_size(png) == (1200, 800), png_size(png)
        keep = os.path.join(BUILD, "tests", "test_flamegraph.png")
        if os.path.isdir(os.path.dirname(keep)):
            shutil.copyfile(png, keep)
            log(f"screenshot: {keep}")
        requested = set(server.requests) - {"/favicon.ico"}
        assert requested == {"/test.html", "/flame.svg"}, server.requests

        assert agent.stop() == 0, agent.log()
    finally:
        if server:
            server.close()
        agent.cleanup()
        cg.remove()


if __name__ == "__main__":
    main([test_flamegraph_in_chromium])
