#!/usr/bin/env python3
"""dashboard_browser.py — loads pages in one headless Chromium, driven by its
DevTools protocol over a pipe (--remote-debugging-pipe: NUL-terminated JSON
on file descriptors 3 and 4), for tests/dashboard.sh.

Usage: dashboard_browser.py CHROMIUM PROFILE_DIR < PAGES
Each line of PAGES is  URL<TAB>WAIT<TAB>DOM_FILE<TAB>PNG_FILE<TAB>TIMEOUT_S:
the page is loaded in a 1280x900 window (URL "=": the page shown stays, for
a WAIT that acts on it), WAIT (a JavaScript expression) is evaluated every
0.2 s until it is true, then the page's DOM is written to
DOM_FILE and a screenshot to PNG_FILE ("-": none).  A page whose WAIT is
not true within TIMEOUT_S seconds gets its DOM written all the same and a
line on stderr; the exit status is then 1.  One browser for every page: a
start of Chromium costs seconds on a loaded machine.
"""
import base64, fcntl, json, os, subprocess, sys, time

def main():
    chromium, profile = sys.argv[1], sys.argv[2]
    to_browser_r, to_browser_w = os.pipe()
    from_browser_r, from_browser_w = os.pipe()
    # the child's ends moved above 9, so that putting them on 3 and 4 cannot
    # overwrite one with the other
    child_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD_CLOEXEC, 10)
    child_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(to_browser_r)
    os.close(from_browser_w)

    def fds():   # in the child: its fd 3 reads our commands, fd 4 writes answers
        os.dup2(child_r, 3)
        os.dup2(child_w, 4)

    proc = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--hide-scrollbars", "--user-data-dir=" + profile,
         "--remote-debugging-pipe", "--window-size=1280,900", "about:blank"],
        preexec_fn=fds, close_fds=False,   # Python's own descriptors are close-on-exec
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(profile + ".log", "ab"))
    os.close(child_r)
    os.close(child_w)
    out, inp = os.fdopen(to_browser_w, "wb"), os.fdopen(from_browser_r, "rb")
    buf = b""
    ids = [0]

    def send(method, params=None, session=None):
        ids[0] += 1
        msg = {"id": ids[0], "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        out.write(json.dumps(msg).encode() + b"\0")
        out.flush()
        return wait_for(ids[0])

    def wait_for(i):
        nonlocal buf
        while True:
            while b"\0" not in buf:
                chunk = inp.read1(65536)
                if not chunk:
                    raise RuntimeError("chromium closed its pipe (see %s.log)" % profile)
                buf += chunk
            raw, buf = buf.split(b"\0", 1)
            m = json.loads(raw)
            if m.get("id") == i:
                if "error" in m:
                    raise RuntimeError("%s" % m["error"])
                return m.get("result", {})

    status = 0
    try:
        target = send("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        send("Page.enable", session=s)
        send("Emulation.setDeviceMetricsOverride",
             {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=s)

        def evaluate(expr):
            r = send("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session=s)
            return r.get("result", {}).get("value")

        for line in sys.stdin:
            if not line.strip():
                continue
            url, wait, dom, png, timeout = line.rstrip("\n").split("\t")
            if url != "=":
                send("Page.navigate", {"url": url}, session=s)
            t0, ok = time.time(), False
            while time.time() - t0 < float(timeout):
                try:
                    ok = bool(evaluate(wait))
                except RuntimeError:      # navigating: no context yet
                    ok = False
                if ok:
                    break
                time.sleep(0.2)
            if not ok:
                print("%s: %s not true after %s s" % (url, wait, timeout), file=sys.stderr)
                status = 1
            with open(dom, "w", encoding="utf-8") as f:
                f.write(evaluate("document.documentElement.outerHTML") or "")
            if png != "-":
                data = send("Page.captureScreenshot", {"format": "png"}, session=s)["data"]
                with open(png, "wb") as f:
                    f.write(base64.b64decode(data))
            print("%s: %.1f s" % (url, time.time() - t0), file=sys.stderr)
        send("Browser.close")
    except Exception as e:       # noqa: a broken browser fails the test, with why
        print("dashboard_browser: %s" % e, file=sys.stderr)
        status = 1
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    return status

if __name__ == "__main__":
    sys.exit(main())
