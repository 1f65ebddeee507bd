#!/usr/bin/python3
"""Self-test of check_dashboard.py: it passes on the repository as it is, and fails, naming the
problem, on copies with one planted mistake each: an alert on per-job series without the
running-job guard, a query of a histogram's bare name, a label a histogram does not have, and a
registered series no header documents.
Usage: check_dashboard_test.py REPO   (exit 1 if any planted mistake goes unnoticed)
"""
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent


def run(repo: pathlib.Path):
    r = subprocess.run([sys.executable, str(HERE / "check_dashboard.py"), "--repo", str(repo)],
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def main() -> None:
    src = pathlib.Path(sys.argv[1])
    failures = 0
    code, out = run(src)
    if code != 0:
        print(f"FAIL: the repository itself does not pass:\n{out}")
        sys.exit(1)

    def plant(what, expect, change):
        nonlocal failures
        with tempfile.TemporaryDirectory() as tmp:
            repo = pathlib.Path(tmp)
            for d in ("coordinator", "worker", "common", "deploy"):
                shutil.copytree(src / d, repo / d)
            change(repo)
            code, out = run(repo)
            if code == 0 or expect not in out:
                print(f"FAIL: {what}: not caught (exit {code}, want {expect!r}):\n{out}")
                failures += 1
            else:
                print(f"ok: {what}")

    def unguarded(repo):
        p = repo / "deploy/prometheus/rules/pipetrain-alerts.yml"
        text = p.read_text()
        guard = '\n          and on (job, instance, job_id) pipetrain_job_state{state="running"} == 1'
        assert guard in text
        p.write_text(text.replace(guard, "", 1))

    def dashboard(repo, edit):
        p = repo / "deploy/grafana/dashboards/pipetrain.json"
        dash = json.loads(p.read_text())
        dash["panels"][1]["targets"][0]["expr"] = edit
        p.write_text(json.dumps(dash))

    def undocumented(repo):
        p = repo / "worker/service/worker_metrics.h"
        p.write_text(p.read_text().replace("pipetrain_worker_busy", "the busy gauge"))

    plant("alert without the running guard", "not guarded by pipetrain_job_state", unguarded)
    plant("histogram queried by its bare name", "is a histogram",
          lambda r: dashboard(r, "pipetrain_job_step_seconds"))
    plant("histogram bucket with a label it lacks", "has no label(s) ['rank']",
          lambda r: dashboard(r, 'pipetrain_job_step_seconds_bucket{rank="0"}'))
    plant("series no header documents", "pipetrain_worker_busy is registered but no header",
          undocumented)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
