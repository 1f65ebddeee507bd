#!/usr/bin/python3
"""Checks the Grafana dashboard and the Prometheus rules against the daemons' metrics.

The dashboard must be valid, provisioning-ready JSON (uid, title, null id, unique panel ids,
a Prometheus data source variable), and every PromQL query in it (panel targets and template
variables) and in the rule files may only name metrics the daemons export, with labels they
carry. Names exported: read from a live scrape (live_scrape.py output, --exported FILE) when
given, otherwise from the metric registrations in the source (coordinator/, worker/, common/;
labels from the `name{label,...}` lists in the headers, where every registered name must be
documented). Recording-rule names are allowed in the rules only.
Histograms: queries use their _bucket (with `le`), _sum and _count series, never the bare name
(which has no samples).
Alerts on per-job series (labelled job_id, directly or through a recording rule) must hold only
while the job runs: `pipetrain_job_state{state="running"}` in the expression, since a job's
series outlive it by the coordinator's retention.
Labels: no exported metric may carry a target label (`job`, `instance`, ...): Prometheus would
rename it `exported_job` (the pipetrain job id is `job_id`), and the scrape configs must not set
honor_labels to hide that. Query variables must be over a label the metric itself exports (the
`job_id` variable, not the scrape `job`), and a matcher on `$var` must use that variable's label.
Usage: check_dashboard.py --repo ROOT [--exported FILE]
"""
import argparse
import json
import pathlib
import re
import sys

import yaml

# PromQL words that are not metric names: functions (followed by "(") are skipped separately.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "inf", "nan", "sum", "min", "max", "avg", "count", "stddev",
            "stdvar", "topk", "bottomk", "quantile", "count_values", "group"}
# Labels Prometheus adds to every scraped series (target labels), allowed on any metric.
TARGET_LABELS = {"instance", "job", "namespace", "pod", "service", "endpoint", "container"}
HISTOGRAM_PARTS = ("_bucket", "_sum", "_count")
RUNNING_GUARD = re.compile(r'pipetrain_job_state\s*\{\s*state\s*=\s*"running"\s*\}')
errors = []
histograms = set()  # exported names that are histograms


def source_metrics(repo: pathlib.Path):
    """metric name -> set of label names, from .Name("...") registrations in the daemons' .cc
    files and the `name{label,...}` lists in their headers."""
    found = {}
    dirs = [repo / "coordinator", repo / "worker", repo / "common"]
    for path in [p for d in dirs for p in d.rglob("*.cc")]:
        text = path.read_text()
        for m in re.finditer(r'\.Name\("(pipetrain_\w+)"\)', text):
            found.setdefault(m.group(1), set())
            if re.search(r"BuildHistogram\(\)\s*$", text[max(0, m.start() - 80):m.start()]):
                histograms.add(m.group(1))
    documented = {}
    for path in [p for d in dirs for p in d.rglob("*.h")]:
        for m in re.finditer(r"\b(pipetrain_\w+)(\{[\w,]*\})?", path.read_text()):
            labels = set(filter(None, (m.group(2) or "{}")[1:-1].split(",")))
            documented.setdefault(m.group(1), set()).update(labels)
    for name in found:
        if name not in documented:
            errors.append(f"{name} is registered but no header documents it (name{{labels}})")
        found[name] = documented.get(name, set())
    return found


def scraped_metrics(path: pathlib.Path):
    """live_scrape.py output: 'name type label,label' per line."""
    found = {}
    for line in path.read_text().splitlines():
        parts = line.split(" ")
        found[parts[0]] = set(filter(None, parts[2].split(","))) if len(parts) > 2 else set()
        if len(parts) > 1 and parts[1] == "histogram":
            histograms.add(parts[0])
    return found


def selectors(expr: str):
    """Yields (metric name, {label names}) for every metric selector in a PromQL expression."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)       # string literals
    expr = re.sub(r"\[[^\]]*\]", "", expr)                 # range / subquery durations
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    for m in re.finditer(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?\s*(\()?", expr):
        name, matchers, call = m.group(1), m.group(2), m.group(3)
        if call and not matchers:
            continue  # a function or aggregation
        if name.lower() in KEYWORDS or re.fullmatch(r"\d+[smhdwy]?", name):
            continue
        start = m.start()
        if start > 0 and (expr[start - 1].isdigit() or expr[start - 1] == "."):
            continue  # part of a number like 1e3
        labels = set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", matchers or ""))
        yield name, labels


def variable_matchers(expr: str):
    """Yields (label, variable) for every matcher whose value uses a dashboard variable."""
    for m in re.finditer(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"', expr):
        for v in re.findall(r"\$\{?([a-zA-Z_][a-zA-Z0-9_]*)", m.group(2)):
            if not v.startswith("__"):  # Grafana built-ins ($__rate_interval, ...)
                yield m.group(1), v


def check_exported_labels(known):
    for name, labels in sorted(known.items()):
        clash = labels & TARGET_LABELS
        if clash:
            errors.append(f"exported {name} carries target label(s) {sorted(clash)}: Prometheus "
                          f"renames them exported_*; use job_id for the pipetrain job")


def check_scrape_config(path: pathlib.Path):
    for sc in yaml.safe_load(path.read_text()).get("scrape_configs", []):
        if sc.get("honor_labels"):
            errors.append(f"{path.name} {sc.get('job_name')}: honor_labels would let a series "
                          f"override the scrape job's `job` label; not needed (job_id)")


def resolve(name: str, known):
    """(exported name, extra labels) a selected series comes from, or None."""
    if name in known:
        return name, set()
    for part in HISTOGRAM_PARTS:
        base = name[: -len(part)]
        if name.endswith(part) and base in histograms:
            return base, {"le"} if part == "_bucket" else set()
    return None


def check_expr(where: str, expr: str, known, recorded=frozenset()):
    for name, labels in selectors(expr):
        if name in recorded:
            continue
        source = resolve(name, known)
        if source is None:
            errors.append(f"{where}: metric {name!r} is not exported by the daemons")
            continue
        if name in histograms:
            errors.append(f"{where}: {name} is a histogram: query {name}_bucket, _sum or _count")
            continue
        unknown = labels - known[source[0]] - source[1] - TARGET_LABELS
        if unknown:
            errors.append(f"{where}: {name} has no label(s) {sorted(unknown)}")


def check_alert_guard(fname: str, rule, known, recorded):
    """An alert over per-job series must hold only while the job runs."""
    names = [n for n, _ in selectors(rule["expr"])]
    names += [n for r in names if r in recorded for n, _ in selectors(recorded[r])]
    per_job = sorted({n for n in names if "job_id" in known.get((resolve(n, known) or ("",))[0],
                                                                    set())
                      and n != "pipetrain_job_state"})
    if per_job and not RUNNING_GUARD.search(rule["expr"]):
        errors.append(f"{fname} {rule['alert']}: alerts on per-job series ({', '.join(per_job)}) "
                      f"but is not guarded by pipetrain_job_state{{state=\"running\"}}: it would "
                      f"keep firing for a job that ended, until its series are removed")


def check_dashboard(path: pathlib.Path, known):
    try:
        dash = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        errors.append(f"{path}: invalid JSON: {e}")
        return 0
    for key in ("uid", "title", "panels", "schemaVersion"):
        if key not in dash:
            errors.append(f"{path}: missing {key!r}")
    if dash.get("id") is not None:
        errors.append(f"{path}: id must be null for provisioning")
    variables = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}
    if variables.get("datasource", {}).get("query") != "prometheus":
        errors.append(f"{path}: needs a 'datasource' variable of Prometheus data sources")
    queries = 0
    var_labels = {}
    for v in variables.values():
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", q or "")
        if v.get("type") == "query":
            if not m:
                errors.append(f"{path}: variable {v['name']}: expected label_values(...)")
                continue
            check_expr(f"variable {v['name']}", m.group(1), known)
            var_labels[v["name"]] = m.group(2)
            exported = set().union(*(known.get(n, set()) for n, _ in selectors(m.group(1))))
            if m.group(2) not in exported:
                errors.append(f"{path}: variable {v['name']}: label {m.group(2)!r} is not one "
                              f"{m.group(1)} exports (a target label? the pipetrain job is job_id)")
            queries += 1
    ids = set()
    for p in dash.get("panels", []):
        where = f"panel {p.get('id')} {p.get('title')!r}"
        if p.get("id") in ids:
            errors.append(f"{where}: duplicate id")
        ids.add(p.get("id"))
        if "gridPos" not in p:
            errors.append(f"{where}: no gridPos")
        if p.get("type") == "row":
            continue
        if p.get("datasource", {}).get("uid") != "${datasource}":
            errors.append(f"{where}: datasource must be the ${{datasource}} variable")
        if not p.get("targets"):
            errors.append(f"{where}: no queries")
        for t in p.get("targets", []):
            check_expr(f"{where} {t.get('refId')}", t.get("expr", ""), known)
            for label, var in variable_matchers(t.get("expr", "")):
                if var not in variables:
                    errors.append(f"{where} {t.get('refId')}: no dashboard variable ${var}")
                elif var in var_labels and var_labels[var] != label:
                    errors.append(f"{where} {t.get('refId')}: matches {label!r} against ${var}, "
                                  f"a variable over {var_labels[var]!r}")
            queries += 1
    return queries


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True, type=pathlib.Path)
    ap.add_argument("--exported", type=pathlib.Path)
    args = ap.parse_args()
    known = scraped_metrics(args.exported) if args.exported else source_metrics(args.repo)
    source = "live scrape" if args.exported else "source registrations"
    if not known:
        sys.exit(f"check_dashboard: no pipetrain metrics found ({source})")
    deploy = args.repo / "deploy"
    check_exported_labels(known)
    check_scrape_config(deploy / "prometheus/prometheus.yml")
    n = check_dashboard(deploy / "grafana/dashboards/pipetrain.json", known)
    rules = []
    for f in sorted((deploy / "prometheus/rules").glob("*.yml")):
        for g in yaml.safe_load(f.read_text())["groups"]:
            rules += [(f.name, r) for r in g["rules"]]
    recorded = {r["record"]: r["expr"] for _, r in rules if "record" in r}
    for fname, r in rules:
        check_expr(f"{fname} {r.get('record') or r.get('alert')}", r["expr"], known, recorded)
    if "pipetrain_job_state" in known:
        for fname, r in rules:
            if "alert" in r:
                check_alert_guard(fname, r, known, recorded)
    for e in errors:
        print(f"FAIL: {e}")
    if errors:
        sys.exit(1)
    print(f"dashboard: {n} queries and {len(rules)} rules use only exported metrics "
          f"({len(known)} names, from {source})")


if __name__ == "__main__":
    main()
