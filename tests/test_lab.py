"""`make lab`: JupyterLab starts headless on loopback, answers its REST API and runs this venv's python3 kernel."""
import importlib.util
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts JupyterLab in a subprocess (make test-fast leaves it out)

ROOT = Path(__file__).resolve().parent.parent
BOOT_S = 60        # the server (and then the kernel) must answer within this
STOP_S = 30        # SIGTERM, then SIGKILL after this
# jupyter_client launches a kernelspec whose argv[0] is one of these with the server's own sys.executable
BARE_PYTHON = {"python", f"python{sys.version_info[0]}", "python%d.%d" % sys.version_info[:2]}

# loopback only: never through an http_proxy from the environment
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _api(port, token, path, method="GET"):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 headers={"Authorization": f"token {token}"},
                                 data=b"{}" if method == "POST" else None)
    with _OPENER.open(req, timeout=5) as resp:
        body = resp.read()
        return resp.status, (json.loads(body) if body else None)


def _in_prefix(path):
    """The kernel's interpreter is this interpreter, or lies inside this (virtual) environment; no symlink resolving,
    which would let a venv's python and the system python it links to pass for each other."""
    path = os.path.abspath(path)
    return path == os.path.abspath(sys.executable) or path.startswith(os.path.abspath(sys.prefix) + os.sep)


def _kill_tree(procs):
    for p in procs:
        try:
            p.kill()
        except Exception:
            pass


def test_lab_serves_api_and_venv_kernel(tmp_path):
    if importlib.util.find_spec("jupyterlab") is None:
        pytest.skip("jupyterlab is not installed in this interpreter")
    import psutil

    token = secrets.token_hex(24)
    # nothing of the user's: no JUPYTER_* settings, and fresh runtime, config and data dirs
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_"))}
    runtime = tmp_path / "runtime"
    env.update(JUPYTER_RUNTIME_DIR=str(runtime), JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
               JUPYTER_DATA_DIR=str(tmp_path / "data"), JUPYTER_TOKEN=token, IPYTHONDIR=str(tmp_path / "ipython"))
    log_path = tmp_path / "lab.log"

    def log_tail():
        return log_path.read_text(errors="replace")[-4000:] if log_path.exists() else ""

    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           "--ServerApp.port=0",           # the OS picks a free port; the server writes it to the runtime dir
           "--ServerApp.port_retries=0", f"--ServerApp.root_dir={ROOT}",
           "--ServerApp.allow_root=True"]  # CI and the dev machines run as root; a no-op otherwise
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    descendants = []
    stopped = True  # by SIGTERM (or by itself), not killed
    try:
        deadline = t0 + BOOT_S
        port, status = None, None
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"jupyter lab exited with {proc.returncode}:\n{log_tail()}"
            if port is None:
                info = sorted(runtime.glob("jpserver-*.json"))
                if info:
                    try:
                        port = json.loads(info[0].read_text())["port"]
                    except (ValueError, KeyError):
                        pass     # written but not complete yet
            if port is not None:
                try:
                    status, body = _api(port, token, "/api/status")
                    break
                except (urllib.error.URLError, ConnectionError, TimeoutError):
                    pass
            time.sleep(0.25)
        assert status == 200, f"no answer from /api/status within {BOOT_S} s (port {port}):\n{log_tail()}"
        assert "started" in body

        # the token is required: without it the API refuses
        with pytest.raises(urllib.error.HTTPError) as refused:
            _OPENER.open(f"http://127.0.0.1:{port}/api/status", timeout=5)
        assert refused.value.code == 403

        # rooted at the repository: the notebooks are there
        _, listing = _api(port, token, "/api/contents/notebooks")
        assert {c["name"] for c in listing["content"]} >= {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}

        # the kernel offered (and the default) is python3, and it is this interpreter
        _, specs = _api(port, token, "/api/kernelspecs")
        assert "python3" in specs["kernelspecs"], specs
        assert specs["default"] == "python3"
        argv0 = specs["kernelspecs"]["python3"]["spec"]["argv"][0]
        assert argv0 in BARE_PYTHON or _in_prefix(argv0), (argv0, sys.prefix)

        # and it really starts: the kernel process runs from this environment
        _, kernel = _api(port, token, "/api/kernels", method="POST")
        kernel_proc = None
        while time.monotonic() < deadline and kernel_proc is None:
            assert proc.poll() is None, f"jupyter lab exited with {proc.returncode}:\n{log_tail()}"
            descendants = psutil.Process(proc.pid).children(recursive=True)
            for child in descendants:
                try:
                    if "ipykernel_launcher" in child.cmdline():
                        kernel_proc = child
                except psutil.Error:
                    pass
            time.sleep(0.25)
        assert kernel_proc is not None, f"no kernel process within {BOOT_S} s:\n{log_tail()}"
        assert _in_prefix(kernel_proc.cmdline()[0]), kernel_proc.cmdline()
        code, _ = _api(port, token, f"/api/kernels/{kernel['id']}", method="DELETE")
        assert code == 204
    finally:
        try:
            descendants = descendants + psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            pass
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                stopped = False
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=STOP_S)
        _kill_tree(p for p in descendants if p.is_running())
    assert stopped, f"jupyter lab did not exit within {STOP_S} s of SIGTERM (it was killed):\n{log_tail()}"
    print(f"jupyter lab up in {time.monotonic() - t0:.1f} s incl. kernel and shutdown, exit {proc.returncode}")
