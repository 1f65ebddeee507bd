#!/usr/bin/python3
"""Structural test over rendered Kubernetes manifests (kubectl kustomize output).

Usage: check_manifests.py --repo ROOT --variant cpu|gpu|monitoring|auth-token|tls|cluster-secret|jobset FILE
Checks every object parses and carries apiVersion/kind/name/namespace; workloads have probes on
their gRPC port, requests and limits, non-root security contexts; selectors match pod labels;
Services and ServiceMonitors point at ports that exist; every flag in a container's args is one
the daemon defines (parsed from *_main.cc) and its ports agree with the container ports; $(VAR)
references resolve; ConfigMaps/PVCs referenced exist; the gpu variant requests nvidia.com/gpu and
the cpu one does not; the jobset example (deploy/k8s/examples/jobset) runs a plan file's ranks
from an indexed Job's completion index.
"""
import argparse
import pathlib
import re
import sys

import yaml

NAMESPACE = "pipetrain"
CLUSTER_SCOPED = {"Namespace"}
DAEMON_MAIN = {"/usr/local/bin/pipetrain-coordinator": "coordinator/coordinator_main.cc",
               "/usr/local/bin/pipetrain-worker": "worker/worker_main.cc"}
errors = []


def err(where, msg):
    errors.append(f"{where}: {msg}")


def daemon_flags(repo, main_cc):
    return set(re.findall(r'add_(?:option|flag)\("(--[a-z0-9-]+)', (repo / main_cc).read_text()))


def port_of(address):
    m = re.fullmatch(r"(.+):(\d+)", address)
    return (m.group(1), int(m.group(2))) if m else (None, None)


def subset(a, b):
    return all(b.get(k) == v for k, v in (a or {}).items())


def check_container(where, c, pod_spec, configmaps, repo, variant, kind):
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    if not c.get("image") or ":" not in c["image"]:
        err(where, f"image {c.get('image')!r} has no tag (the overlay sets it)")
    res = c.get("resources", {})
    for part in ("requests", "limits"):
        for r in ("cpu", "memory"):
            if r not in res.get(part, {}):
                err(where, f"resources.{part}.{r} missing")
    gpus = int(res.get("limits", {}).get("nvidia.com/gpu", 0))
    if variant == "gpu" and kind == "StatefulSet" and gpus < 1:
        err(where, "gpu overlay: worker must limit nvidia.com/gpu >= 1")
    if variant == "cpu" and gpus:
        err(where, "cpu overlay must not request GPUs")
    sc = c.get("securityContext", {})
    if sc.get("allowPrivilegeEscalation") is not False or not sc.get("readOnlyRootFilesystem"):
        err(where, "securityContext: want allowPrivilegeEscalation false, readOnlyRootFilesystem")
    for probe in ("readinessProbe", "livenessProbe"):
        p = c.get(probe)
        if not p:
            err(where, f"{probe} missing")
        elif "grpc" in p and p["grpc"].get("port") != ports.get("grpc"):
            err(where, f"{probe}: grpc port {p['grpc'].get('port')} != container port grpc")
        elif variant != "tls" and "grpc" not in p:
            err(where, f"{probe}: want a native grpc probe")
    # Variables visible to $(VAR) in args: env entries and envFrom ConfigMap keys.
    env = {e["name"] for e in c.get("env", [])}
    for ef in c.get("envFrom", []):
        name = ef.get("configMapRef", {}).get("name")
        if name not in configmaps:
            err(where, f"envFrom ConfigMap {name!r} is not rendered")
        else:
            env |= set(configmaps[name])
    values = dict(next(iter(configmaps.values()), {}))
    for cm in configmaps.values():
        values.update(cm)
    command = (c.get("command") or [None])[0]
    if command not in DAEMON_MAIN:
        err(where, f"command {command!r} is not a pipetrain daemon")
        return
    flags = daemon_flags(repo, DAEMON_MAIN[command])
    args = {}
    for a in c.get("args", []):
        flag, _, value = a.partition("=")
        if flag not in flags:
            err(where, f"flag {flag} is not defined in {DAEMON_MAIN[command]}")
        for var in re.findall(r"\$\((\w+)\)", value):
            if var not in env:
                err(where, f"{flag}: $({var}) is not defined in env/envFrom")
        args[flag] = value
    expected = {"--listen": "grpc", "--metrics-listen": "metrics"}
    if "worker" in command:
        expected["--transport-listen"] = "transport"
        for flag in ("--listen", "--transport-listen"):
            if not args.get(flag, "").startswith("$(POD_IP):"):
                err(where, f"{flag} must bind the pod IP (it is the registered address)")
        coord = args.get("--coordinator", "")
        coord = re.sub(r"\$\((\w+)\)", lambda m: values.get(m.group(1), "?"), coord)
        if port_of(coord) != ("pipetrain-coordinator", 7070):
            err(where, f"--coordinator resolves to {coord!r}, not the coordinator Service")
        pod_ip = [e for e in c.get("env", []) if e["name"] == "POD_IP"]
        if not pod_ip or pod_ip[0]["valueFrom"]["fieldRef"]["fieldPath"] != "status.podIP":
            err(where, "POD_IP must come from the downward API (status.podIP)")
    for flag, port_name in expected.items():
        _, port = port_of(args.get(flag, ""))
        if port is None or port != ports.get(port_name):
            err(where, f"{flag}={args.get(flag)} does not match container port {port_name}")
    mounts = {m["name"] for m in c.get("volumeMounts", [])}
    volumes = {v["name"] for v in pod_spec.get("volumes", [])}
    if mounts - volumes:
        err(where, f"volumeMounts without volumes: {sorted(mounts - volumes)}")


def check_jobset(jobsets, repo):
    """One JobSet, one indexed Job whose pods run a rank of a plan file: the rank from the
    completion index, flags the worker has, DNS names for the plan's addresses."""
    if len(jobsets) != 1:
        err("jobset", f"want one JobSet, got {len(jobsets)}")
        return
    js = jobsets[0]
    name = js["metadata"]["name"]
    if not js["spec"].get("network", {}).get("enableDNSHostnames"):
        err(name, "network.enableDNSHostnames must be true (the plan's addresses are pod names)")
    jobs = js["spec"].get("replicatedJobs", [])
    if len(jobs) != 1 or jobs[0].get("replicas") != 1:
        err(name, "want one replicated Job with replicas 1 (one pipeline)")
        return
    job = jobs[0]["template"]["spec"]
    if job.get("completionMode") != "Indexed" or job.get("completions") != job.get("parallelism"):
        err(name, "the Job must be Indexed with completions == parallelism (all ranks at once)")
    pod = job["template"]["spec"]
    c = pod["containers"][0]
    flags = daemon_flags(repo, "worker/worker_main.cc")
    args = c.get("args", [])
    for arg in args:
        flag = arg.split("=", 1)[0]
        if flag.startswith("--") and flag not in flags:
            err(name, f"{flag}: pipetrain-worker has no such flag")
    if "--rank=$(RANK)" not in args or not any(a_.startswith("--plan=") for a_ in args):
        err(name, "want --plan=FILE and --rank=$(RANK)")
    env = {e["name"]: e for e in c.get("env", [])}
    path = env.get("RANK", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath", "")
    if path != "metadata.annotations['batch.kubernetes.io/job-completion-index']":
        err(name, "RANK must come from the pod's completion index annotation")
    if pod.get("restartPolicy") != "Never" or job.get("backoffLimit") != 0:
        err(name, "a failed rank must fail the set (restartPolicy Never, backoffLimit 0)")
    sc = c.get("securityContext", {})
    if sc.get("allowPrivilegeEscalation") is not False or not sc.get("readOnlyRootFilesystem"):
        err(name, "securityContext: want allowPrivilegeEscalation false, readOnlyRootFilesystem")
    mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
    for want in ("/plan", "/data", "/checkpoints"):
        if want not in mounts:
            err(name, f"does not mount {want}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True, type=pathlib.Path)
    ap.add_argument("--variant", required=True, choices=["cpu", "gpu", "monitoring", "auth-token", "tls",
                                                      "cluster-secret", "jobset"])
    ap.add_argument("file", type=pathlib.Path)
    a = ap.parse_args()
    objs = [o for o in yaml.safe_load_all(a.file.read_text()) if o]
    by_kind = {}
    for o in objs:
        where = f"{o.get('kind')}/{o.get('metadata', {}).get('name')}"
        for key in ("apiVersion", "kind", "metadata"):
            if key not in o:
                err(where, f"missing {key}")
        if o.get("kind") not in CLUSTER_SCOPED and o["metadata"].get("namespace") != NAMESPACE:
            err(where, f"namespace is {o['metadata'].get('namespace')!r}, want {NAMESPACE!r}")
        by_kind.setdefault(o["kind"], []).append(o)
    configmaps = {o["metadata"]["name"]: o.get("data", {}) for o in by_kind.get("ConfigMap", [])}
    pvcs = {o["metadata"]["name"] for o in by_kind.get("PersistentVolumeClaim", [])}
    services = by_kind.get("Service", [])
    workloads = by_kind.get("Deployment", []) + by_kind.get("StatefulSet", [])
    if a.variant not in ("monitoring", "jobset"):
        kinds = sorted(by_kind)
        for want in ("Namespace", "ConfigMap", "PersistentVolumeClaim", "Service", "Deployment",
                     "StatefulSet"):
            if want not in by_kind:
                err(a.file.name, f"no {want} rendered (got {kinds})")
    for w in workloads:
        where = f"{w['kind']}/{w['metadata']['name']}"
        spec, tmpl = w["spec"], w["spec"]["template"]
        labels = tmpl["metadata"].get("labels", {})
        if not spec["selector"].get("matchLabels") or not subset(spec["selector"]["matchLabels"], labels):
            err(where, "selector.matchLabels do not match the pod template's labels")
        if not subset(spec["selector"]["matchLabels"], w["metadata"].get("labels", {})):
            err(where, "object labels lack the selector labels")
        ps = tmpl["spec"]
        psc = ps.get("securityContext", {})
        if not psc.get("runAsNonRoot") or not psc.get("runAsUser"):
            err(where, "pod must run as a non-root uid")
        for v in ps.get("volumes", []):
            claim = v.get("persistentVolumeClaim", {}).get("claimName")
            if claim and claim not in pvcs:
                err(where, f"PVC {claim!r} is not rendered")
        if not any(subset(s["spec"].get("selector"), labels) for s in services):
            err(where, "no Service selects these pods")
        for s in services:
            if subset(s["spec"].get("selector"), labels):
                names = {p["name"] for c in ps["containers"] for p in c.get("ports", [])}
                for p in s["spec"]["ports"]:
                    if p["targetPort"] not in names:
                        err(f"Service/{s['metadata']['name']}", f"targetPort {p['targetPort']} not a container port")
        if w["kind"] == "Deployment":
            if spec.get("replicas") != 1 or spec.get("strategy", {}).get("type") != "Recreate":
                err(where, "coordinator must be 1 replica with Recreate (one SQLite owner)")
        else:
            headless = [s for s in services if s["metadata"]["name"] == spec.get("serviceName")]
            if not headless or headless[0]["spec"].get("clusterIP") != "None":
                err(where, f"serviceName {spec.get('serviceName')!r} is not a headless Service")
        for c in ps["containers"]:
            check_container(f"{where}/{c['name']}", c, ps, configmaps, a.repo, a.variant, w["kind"])
    if a.variant in ("auth-token", "tls"):
        coord = [w for w in workloads if w["kind"] == "Deployment"][0]
        c = coord["spec"]["template"]["spec"]["containers"][0]
        want = {"auth-token": "--auth-token=$(PIPETRAIN_AUTH_TOKEN)",
                "tls": "--tls-cert=/etc/pipetrain/tls/tls.crt"}[a.variant]
        if want not in c["args"]:
            err(a.variant, f"coordinator args lack {want}")
        if a.variant == "tls" and any("grpc" in c[p] for p in ("readinessProbe", "livenessProbe",
                                                               "startupProbe")):
            err(a.variant, "kubelet gRPC probes cannot speak TLS: want tcpSocket probes")
    if a.variant not in ("monitoring", "jobset"):
        # The shared volumes at the same paths; the policy's and the budget's pods and ports.
        mounts = {w["kind"]: {m["mountPath"]: m for c in w["spec"]["template"]["spec"]["containers"]
                              for m in c.get("volumeMounts", [])} for w in workloads}
        for kind, want in (("Deployment", ["/checkpoints"]),
                           ("StatefulSet", ["/checkpoints", "/data"])):
            for path in want:
                if path not in mounts.get(kind, {}):
                    err(kind, f"does not mount {path}")
        if not mounts.get("StatefulSet", {}).get("/data", {}).get("readOnly"):
            err("StatefulSet", "workers must mount /data read-only")
        pods = {w["kind"]: w["spec"]["template"] for w in workloads}
        ports = {k: {p["name"] for c in t["spec"]["containers"] for p in c.get("ports", [])}
                 for k, t in pods.items()}
        for np in by_kind.get("NetworkPolicy", []):
            target = [k for k, t in pods.items()
                      if subset(np["spec"]["podSelector"]["matchLabels"], t["metadata"]["labels"])]
            if not target:
                err(f"NetworkPolicy/{np['metadata']['name']}", "selects no pipetrain pods")
            for rule in np["spec"].get("ingress", []):
                for p in rule.get("ports", []):
                    if target and p["port"] not in ports[target[0]]:
                        err(f"NetworkPolicy/{np['metadata']['name']}", f"port {p['port']} not a container port")
                for peer in rule.get("from", []):
                    sel = peer.get("podSelector", {}).get("matchLabels", {})
                    if not any(subset(sel, t["metadata"]["labels"]) for t in pods.values()):
                        err(f"NetworkPolicy/{np['metadata']['name']}", f"from {sel} selects no pod")
        if "NetworkPolicy" not in by_kind:
            err(a.file.name, "no NetworkPolicy rendered")
        for pdb in by_kind.get("PodDisruptionBudget", []):
            if not subset(pdb["spec"]["selector"]["matchLabels"], pods["StatefulSet"]["metadata"]["labels"]):
                err(f"PodDisruptionBudget/{pdb['metadata']['name']}", "does not select the workers")
        if "PodDisruptionBudget" not in by_kind:
            err(a.file.name, "no PodDisruptionBudget rendered")
    if a.variant == "cluster-secret":
        # Both daemons read the secret from the environment (never args), from the Secret.
        for w in workloads:
            c = w["spec"]["template"]["spec"]["containers"][0]
            env = {e["name"]: e for e in c.get("env", [])}
            ref = env.get("PIPETRAIN_CLUSTER_SECRET", {}).get("valueFrom", {}).get("secretKeyRef", {})
            if ref.get("name") != "pipetrain-cluster" or ref.get("key") != "secret":
                err(w["metadata"]["name"], "PIPETRAIN_CLUSTER_SECRET not from Secret pipetrain-cluster/secret")
            if any("secret" in a_ for a_ in c.get("args", [])):
                err(w["metadata"]["name"], "a secret in args: every process on the node can read them")
    if a.variant == "monitoring":
        sms = by_kind.get("ServiceMonitor", [])
        if len(sms) != 2 or "PrometheusRule" not in by_kind:
            err(a.file.name, "want two ServiceMonitors and a PrometheusRule")
        for sm in sms:
            ep = sm["spec"]["endpoints"][0]
            if ep.get("port") != "metrics":
                err(sm["metadata"]["name"], "endpoint port must be the Services' 'metrics' port")
            if ep.get("honorLabels"):
                err(sm["metadata"]["name"], "no honorLabels: `job` is the scrape job; the "
                    "pipetrain job is the series' job_id label")
    if a.variant == "jobset":
        check_jobset(by_kind.get("JobSet", []), a.repo)
    for e in errors:
        print(f"FAIL: {e}")
    if errors:
        sys.exit(1)
    print(f"manifests ({a.variant}): {len(objs)} objects, {len(workloads)} workloads OK")


if __name__ == "__main__":
    main()
