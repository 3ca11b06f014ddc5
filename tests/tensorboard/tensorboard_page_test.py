"""TensorBoard's web page on ember's event files: starts `tensorboard --logdir` on loopback over
what tensorboard_fixture wrote, asks its scalars API for the run's tags and points, and saves a
headless Chromium screenshot of the scalars page, checked to be the rendered dashboard.

usage: tensorboard_page_test.py FIXTURE WORK_DIR SCREENSHOT
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

from PIL import Image

from checks import check, finish

fixture, work, shot = sys.argv[1], sys.argv[2], sys.argv[3]
chromium = shutil.which("chromium") or shutil.which("chromium-browser")
if chromium is None:
    print("SKIP: chromium is not installed (./scripts/setup.sh tests)")
    sys.exit(77)

logdir = os.path.join(work, "logdir")
shutil.rmtree(logdir, ignore_errors=True)
subprocess.run([fixture, "all", os.path.join(logdir, "ember")], check=True)
expected = json.load(open(os.path.join(logdir, "ember", "expected.json")))
want = {}
for s in expected["scalars"]:
    run = "ember" if s["run"] == "." else "ember/" + s["run"]
    want.setdefault(run, {}).setdefault(s["tag"], []).append(s)

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
base = "http://127.0.0.1:%d" % port
server = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", logdir, "--host", "127.0.0.1",
                           "--port", str(port), "--load_fast=false", "--reload_interval", "1"],
                          stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "tensorboard.log"), "w"))


def get_json(path):
    with urllib.request.urlopen(base + path, timeout=10) as r:
        return json.load(r)


try:
    tags = None
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            tags = get_json("/data/plugin/scalars/tags")
            if set(tags) == set(want):
                break
        except OSError:
            pass
        time.sleep(0.5)
    check(tags is not None and {r: sorted(t) for r, t in tags.items()} == {r: sorted(t) for r, t in want.items()},
          "scalars tags %s, expected %s" % (tags, {r: sorted(t) for r, t in want.items()}))
    for run, by_tag in want.items():
        for tag, points in by_tag.items():
            q = urllib.parse.urlencode({"run": run, "tag": tag})
            got = [(p[1], p[2]) for p in get_json("/data/plugin/scalars/scalars?" + q)]
            check([g[0] for g in got] == [p["step"] for p in points], "%s %s: steps %s" % (run, tag, [g[0] for g in got]))
            check(all(abs(g[1] - p["value"]) <= 1e-6 * max(1, abs(p["value"])) for g, p in zip(got, points)),
                  "%s %s: values differ" % (run, tag))

    os.makedirs(os.path.dirname(os.path.abspath(shot)), exist_ok=True)
    if os.path.exists(shot):
        os.remove(shot)
    profile = os.path.join(work, "chromium-profile")
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--user-data-dir=" + profile, "--window-size=1400,1000", "--virtual-time-budget=20000",
                    "--screenshot=" + os.path.abspath(shot), base + "/#scalars"],
                   check=True, timeout=120, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    img = Image.open(shot).convert("RGB")
    check(img.size == (1400, 1000), "screenshot size %s" % (img.size,))
    # The rendered dashboard: TensorBoard's orange bar along the top, and plotted curves in the
    # run colours (many colours; an error or blank page has a handful).
    top = img.crop((0, 0, 1400, 40)).getcolors(1 << 20)
    orange = sum(n for n, (r, g, b) in top if r > 230 and 100 < g < 150 and b < 40)
    check(orange > 1400 * 40 // 2, "the screenshot has no TensorBoard header (%d orange pixels)" % orange)
    colours = len(img.getcolors(1 << 20) or [])
    check(colours > 500, "the screenshot has %d colours: no charts rendered" % colours)
finally:
    server.terminate()
    server.wait(timeout=30)

finish("tensorboard page: %d runs, tags %s served from ember's files; scalars page rendered to %s"
       % (len(want), sorted({t for r in want.values() for t in r}), shot))
