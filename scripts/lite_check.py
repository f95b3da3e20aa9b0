"""The JupyterLite site (``make lite``) in headless Chromium, served on 127.0.0.1 only.

Usage: python scripts/lite_check.py [--site site] [--expect auto|ready|not-ready]

Serves ``site/`` on 127.0.0.1 (a free port; Python's http.server, stopped by its process id)
and opens notebook 01 in Debian's Chromium through Playwright (``scripts/browser_check.py``'s
harness: its Chromium lookup and the explorer checks), with every other host blocked twice: a
host resolver rule in Chromium (that covers the kernel's Web Worker too) and a Playwright route
that aborts any request not for 127.0.0.1. It checks, and times:

* the Pyodide kernel starts from the site's own files (the Pyodide core, micropip, ipython, ...)
  to an idle kernel: "first load to a ready kernel";
* the site serves llminfer's pure-Python wheel (``pypi/llminfer-*.whl``, 200) and the prepare
  cell installs it, and ``import llminfer`` works (it needs no numpy; its parts do);
* the prepare cell's one line: where the site's ``llminfer-lite.json`` says numpy/pandas/
  matplotlib come from Pyodide's CDN (unreachable here), the promised ``NOT READY: numpy,
  pandas, matplotlib did not import: ...`` naming them; where they are in the site
  (``make lite WHEELS=DIR``), ``ready: ...``, then ``import llminfer`` is timed, all cells of
  notebook 01 run and every explorer is moved (its picture must change), as
  ``make test-browser`` does in JupyterLab.

Report: benchmarks/out/lite_report.json. Exit 0 when every check passed; without Chromium or
Playwright it says why it skipped and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent))
import browser_check as bc  # the harness beside this script

ROOT = bc.ROOT
OUT = bc.OUT
NOTEBOOK = "notebooks/01_introduction.ipynb"
SECOND = "notebooks/02_prefill_and_decode.ipynb"
SCIENTIFIC = ("numpy", "pandas", "matplotlib")
PREPARE_OUTPUT = ".jp-Cell:first-child .jp-OutputArea-output"


class Handler(http.server.SimpleHTTPRequestHandler):
    """Static files with the types a browser insists on for modules and WebAssembly."""

    extensions_map: ClassVar[dict[str, str]] = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".wasm": "application/wasm",
        ".mjs": "text/javascript",
        ".js": "text/javascript",
        ".json": "application/json",
        ".whl": "application/octet-stream",
    }

    def log_message(self, format, *args):
        sys.stderr.write("%s\n" % (format % args))


def serve(site: Path, port: int) -> None:
    """In the child process: serve ``site`` on 127.0.0.1:port until killed."""
    handler = functools.partial(Handler, directory=str(site))
    http.server.ThreadingHTTPServer(("127.0.0.1", port), handler).serve_forever()


def start_server(site: Path, port: int, log) -> subprocess.Popen:
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import lite_check; "
        "lite_check.serve(__import__('pathlib').Path(sys.argv[2]), int(sys.argv[3]))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(Path(__file__).parent), str(site), str(port)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    import urllib.request

    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the site's server did not start")


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def served_paths(log: Path) -> dict[str, int]:
    """Path → status of every GET in the server's log."""
    found = {}
    for line in log.read_text(errors="replace").splitlines():
        match = re.match(r'"GET (\S+) HTTP/[\d.]+" (\d+)', line)
        if match:
            found[match.group(1)] = int(match.group(2))
    return found


def run_cell_text(page, index: int, timeout_s: float) -> tuple[str, float, int]:
    """Select cell ``index`` of the notebook, run it (Shift+Enter); its output text, the
    seconds from the key press that started it to its end, and the presses needed."""
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    output = cell.locator(".jp-OutputArea-output")
    prompt = cell.locator(".jp-InputPrompt")
    deadline = time.monotonic() + timeout_s
    # A key press while the kernel is still starting was seen to be lost (the prompt stays
    # "[ ]:"): pressed again, up to three times, when the cell has not started in 15 s.
    for presses in range(1, 4):  # noqa: B007  (the count is returned)
        cell.locator(".jp-InputPrompt").first.click()  # selects it, source hidden or not
        page.keyboard.press("Shift+Enter")
        pressed = time.monotonic()
        while time.monotonic() < min(deadline, pressed + 15):
            if prompt.inner_text().strip() != "[ ]:":
                break
            page.wait_for_timeout(200)
        else:
            continue
        break
    while time.monotonic() < deadline:
        text = prompt.inner_text()
        if re.search(r"\[\d+\]", text):
            break
        page.wait_for_timeout(200)
    else:
        raise TimeoutError(f"cell {index} did not finish in {timeout_s:.0f} s")
    return "\n".join(output.all_inner_texts()), time.monotonic() - pressed, presses


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "site")
    parser.add_argument("--expect", choices=("auto", "ready", "not-ready"), default="auto")
    parser.add_argument("--budget-s", type=float, default=150.0)
    args = parser.parse_args(argv)
    site = args.site.resolve()
    manifest = site / "llminfer-lite.json"
    if not manifest.exists():
        print(f"lite check: no site at {site} (make lite)")
        return 1
    built = json.loads(manifest.read_text())
    chromium = bc.find_chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("lite check skipped: the playwright package is not installed (requirements.txt)")
        return 0
    if chromium is None:
        print("lite check skipped: no Chromium found (apt-get install chromium, or CHROMIUM=)")
        return 0
    expect = args.expect
    if expect == "auto":  # the CDN is blocked: ready only where the site serves the wheels
        expect = "not-ready" if set(SCIENTIFIC) & set(built["cdn"]) else "ready"
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    OUT.mkdir(parents=True, exist_ok=True)
    port = bc.free_port()
    log = open(OUT / "lite_server.log", "w")  # noqa: SIM115 (closed below)
    server = start_server(site, port, log)
    base = f"http://127.0.0.1:{port}"
    report: dict = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "expect": expect,
                    "load_before": bc.load_average(), "problems": []}  # fmt: skip
    served: dict[str, int] = {}
    blocked: list[str] = []
    console: list[str] = []
    problems = report["problems"]
    started = time.monotonic()
    page = None
    stamps: list[tuple[float, str]] = []  # when the page said what (the kernel's start-up)
    try:
        with sync_playwright() as pw:
            launch = ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                      "--disable-background-networking", "--disable-component-update",
                      "--no-first-run", "--disable-sync"]  # fmt: skip
            if hasattr(os, "geteuid") and os.geteuid() == 0:
                launch.append("--no-sandbox")
            browser = pw.chromium.launch(executable_path=chromium, headless=True, args=launch)
            report["chromium_version"] = browser.version
            context = browser.new_context(viewport={"width": 1400, "height": 1000})

            def route(r):
                if r.request.url.startswith(bc.LOCAL):
                    r.continue_()
                else:
                    blocked.append(r.request.url)
                    r.abort("blockedbyclient")

            context.route("**/*", route)
            page = context.new_page()

            def said(m):
                console.append(f"console.{m.type}: {m.text}")
                stamps.append((time.monotonic(), m.text))

            page.on("console", said)
            page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
            t0 = time.monotonic()
            page.goto(f"{base}/lab/index.html?path={NOTEBOOK}", timeout=60_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            page.wait_for_selector(
                ".jp-Notebook-ExecutionIndicator[data-status='idle']",
                timeout=max(1_000, (started + args.budget_s - 60 - time.monotonic()) * 1000),
            )
            report["first_load_to_idle_kernel_s"] = time.monotonic() - t0
            line, report["prepare_cell_s"], report["prepare_presses"] = run_cell_text(page, 0, 90)
            # The indicator says idle before the kernel has started: its last start-up step
            # (ipython and jedi loaded, in the console) is when it can run a cell.
            ready = [t for t, text in stamps if text.startswith("Loaded jedi")]
            report["first_load_to_ready_kernel_s"] = (ready[0] - t0) if ready else None
            report["prepare_output"] = line
            idle_s, prepare_s = report["first_load_to_idle_kernel_s"], report["prepare_cell_s"]
            print(f"lite check: kernel idle after {idle_s:.1f} s; the prepare cell said, after "
                  f"{prepare_s:.1f} s: {line}")  # fmt: skip
            # What the site served, from the server's log: the kernel's Web Worker fetches
            # its files too, and those the page's own events do not all show.
            log.flush()
            served.update(served_paths(OUT / "lite_server.log"))
            wheel = [u for u in served if u.startswith("/pypi/llminfer-") and ".whl" in u]
            report["llminfer_wheel"] = {u: served[u] for u in wheel}
            if not any(served[u] == 200 for u in wheel):
                problems.append("the site did not serve llminfer's wheel (pypi/llminfer-*.whl)")
            if served.get("/static/pyodide/pyodide.asm.wasm") != 200:
                problems.append("the Pyodide core was not loaded from the site")
            report["served_wheels"] = sorted(u.split("?")[0] for u in served if ".whl" in u)
            lines = [ln for ln in line.splitlines() if ln.startswith(("ready:", "NOT READY:"))]
            if len(lines) != 1:
                problems.append(f"the prepare cell did not say one line: {line!r}")
            elif expect == "not-ready":
                said = lines[0]
                named = all(name in said.split(" did not import")[0] for name in SCIENTIFIC)
                if not (said.startswith("NOT READY: ") and named and "WHEELS=DIR" in said):
                    problems.append(f"not the promised message: {said!r}")
                if "installed from this site and imports" not in said:
                    problems.append(f"llminfer did not install and import: {said!r}")
            else:
                if not lines[0].startswith("ready:"):
                    problems.append(f"the kernel is not ready: {lines[0]!r}")
                else:
                    t2 = time.monotonic()
                    index = page.locator(".jp-Notebook .jp-Cell").count()
                    # `import llminfer` timed in the kernel, in a fresh cell at the end
                    page.locator(".jp-Notebook .jp-Cell").nth(index - 1).click()
                    bc.menu(page, "Run", "Run All Cells")
                    deadline = time.monotonic() + 240
                    while page.evaluate(bc.RUN_STATE_JS) not in ("done", "error"):
                        if time.monotonic() > deadline:
                            raise TimeoutError("Run All did not finish")
                        page.wait_for_timeout(300)
                    report["run_all_s"] = time.monotonic() - t2
                    if page.evaluate(bc.RUN_STATE_JS) == "error":
                        problems.append("a cell of notebook 01 raised in Pyodide")
                    records = []
                    for explorer in page.locator(".llminfer-explorer").all():
                        explorer.scroll_into_view_if_needed()
                        records.append(bc.check_explorer(page, explorer, {}, 30))
                    report["explorers"] = records
                    for r in records:
                        problems += [f"{r['explorer']}: {p}" for p in r["problems"]]
                    lat = [m["latency_ms"] for r in records for m in r["moves"] if m["reacted"]]
                    report["explorer_update_ms_p50"] = bc.percentile(lat, 50)
                    report["explorer_update_ms_p95"] = bc.percentile(lat, 95)
            # One kernel at a time: a second notebook opened in the tab starts no second
            # kernel for the first (no tabs restored from an earlier visit).
            page.goto(f"{base}/lab/index.html?path={SECOND}", timeout=60_000)
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']",
                                   timeout=60_000)  # fmt: skip
            page.wait_for_timeout(1000)
            tabs = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab").count()
            kernels = page.evaluate(
                "() => [...window.jupyterapp.serviceManager.kernels.running()].length"
            )
            report["after_second_notebook"] = {"tabs": tabs, "kernels": kernels}
            if tabs != 1 or kernels != 1:
                problems.append(f"a second notebook left {tabs} tabs and {kernels} kernels")
            context.close()
            browser.close()
    except Exception as exc:
        problems.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
        with contextlib.suppress(Exception):  # the picture helps; its absence is no error
            page.screenshot(path=str(OUT / "lite_failed.png"))
        (OUT / "lite_failed.log").write_text("\n".join(console))
    finally:
        stop_server(server)
        log.close()
    size = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
    report["console"] = [f"{t - started:6.1f} s {text[:160]}" for t, text in stamps[:120]]
    report.update(
        seconds=time.monotonic() - started,
        site_mb=size / 1e6,
        blocked_requests=sorted(set(blocked)),
        passed=not problems,
    )
    (OUT / "lite_report.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(f"lite check: site {size / 1e6:.0f} MB; requests to other hosts (blocked): "
          f"{len(set(blocked))}; report: benchmarks/out/lite_report.json")  # fmt: skip
    for p in problems:
        print(f"lite check: PROBLEM: {p}")
    print(f"lite: {int(not problems)} passed, {int(bool(problems))} failed")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
