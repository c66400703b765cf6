#!/usr/bin/env python3
"""deploy_check.py — the deployment files (deploy/) are wired right.

    deploy_check.py SRCDIR TIRD_HELP WORKER_HELP            check the files
    deploy_check.py SRCDIR TIRD_HELP WORKER_HELP --mutate   and prove each
                                                            check can fail

No docker, kubectl or haproxy runs here: every YAML is parsed (python3-yaml)
and its field names and cross references are asserted, the way a reader
would check them by hand.  tird's settings and flags, and tird-worker's
flags, come from their --help (TIRD_HELP, WORKER_HELP: files of that text),
so a setting in a config that tird does not know is caught.

What is checked:
  deploy/compose.yaml   postgres (postgres:15, a pg_isready healthcheck, its
                        user / database / password file those of the
                        replicas' URL); the tird replicas (built from the
                        Containerfile's `tird` target, --config on the
                        mounted deploy/tird.compose.conf, a healthcheck on
                        /healthz at the port the config listens on, waiting
                        for postgres healthy, every /run/secrets/X they read
                        a secret they mount); the lb (haproxy, its config
                        mounted, its published port its bind port, waiting
                        for each replica healthy); the worker (the
                        `tird-worker` target, --server the lb, its token from
                        a mounted secret); every secret a file under
                        ./secrets/, which .gitignore ignores and
                        make-secrets.sh writes
  deploy/haproxy.cfg    the bind port; every backend health-checks GET
                        /healthz for a 200 and its servers are exactly the
                        replicas at their port; one round-robin backend
                        serves every route, the workers' too (no route
                        split off, no stickiness: any replica answers any
                        worker, whose batches live in the database)
  deploy/k8s/*.yaml     apiVersion / kind of each object; the ConfigMap's
                        tird.conf of real settings; the Secret's keys, the
                        worker token one of its tokens with scope worker; the
                        Deployment (2 replicas, readiness and liveness on
                        /healthz at the port tird listens on, --config the
                        mounted ConfigMap key, --db from a Secret key that
                        exists, token_file under the mounted Secret, resources,
                        a numeric runAsUser); the Services select the pods and
                        reach that port; the DaemonSet (a GPU nodeSelector and
                        nvidia.com/gpu, --target cuda, --server a Service
                        of the tird pods at its port, TIRD_TOKEN from the
                        Secret); no Service has session affinity

--mutate then applies each of MUTATIONS to a copy of the texts (the text it
replaces must be there, so a mutation cannot go stale unnoticed) and
asserts that the check reports a fault naming the expected thing
(DEPLOY_CHECK_VERBOSE=1 prints each mutation's fault).
"""
import copy
import os
import re
import shlex
import sys

import yaml

FILES = [
    "deploy/compose.yaml", "deploy/haproxy.cfg", "deploy/tird.compose.conf",
    "deploy/Containerfile", "deploy/make-secrets.sh", ".gitignore",
    "deploy/k8s/configmap.yaml", "deploy/k8s/secret.yaml",
    "deploy/k8s/deployment.yaml", "deploy/k8s/service.yaml",
    "deploy/k8s/worker-daemonset.yaml",
]
SCOPES = {"read", "submit", "worker", "admin"}


def help_flags(text):
    """The --flags an option list of --help names (two spaces, --name)."""
    return set(re.findall(r"^  (--[a-z][a-z0-9-]*)", text, re.M))


class Checker:
    def __init__(self, texts, tird_help, worker_help):
        self.t = texts
        self.faults = []
        flags = help_flags(tird_help)
        self.settings = {f[2:].replace("-", "_") for f in flags}
        self.tird_flags = flags | {"--config"}
        self.worker_flags = help_flags(worker_help)

    def fault(self, where, msg):
        self.faults.append(f"{where}: {msg}")

    def load(self, name, many=False):
        try:
            if many:
                return [d for d in yaml.safe_load_all(self.t[name]) if d is not None]
            return yaml.safe_load(self.t[name])
        except yaml.YAMLError as e:
            self.fault(name, f"does not parse: {e}")
            return [] if many else {}

    # ---- shared ------------------------------------------------------------------------
    def conf(self, where, text):
        """{name: value} of a tird.conf text, each name checked to be a setting."""
        out = {}
        for n, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            m = re.match(r"^([A-Za-z0-9_]+)\s*=\s*(.*)$", line)
            if not m:
                self.fault(where, f"line {n}: expected `name = value`, got {line!r}")
                continue
            if m.group(1) not in self.settings:
                self.fault(where, f"line {n}: {m.group(1)} is not a tird setting (tird --help)")
            out[m.group(1)] = m.group(2).strip()
        return out

    def listen_port(self, where, conf):
        m = re.match(r"^.*:(\d+)$", conf.get("listen", ""))
        if not m:
            self.fault(where, f"listen = {conf.get('listen')!r}: expected HOST:PORT")
            return None
        if not conf["listen"].startswith("0.0.0.0:"):
            self.fault(where, f"listen = {conf['listen']}: a container must listen on 0.0.0.0")
        return int(m.group(1))

    def flags(self, where, args, known):
        """{--flag: value} of an argument list, each flag checked to be one of known."""
        out, i = {}, 0
        while i < len(args):
            a = args[i]
            if not a.startswith("--"):
                self.fault(where, f"argument {a!r} is not a flag")
                i += 1
                continue
            if a not in known:
                self.fault(where, f"{a} is not a flag of the program (--help)")
            out[a] = args[i + 1] if i + 1 < len(args) else None
            i += 2
        return out

    def shell_program(self, where, svc, name):
        """The arguments after the program NAME in a service's entrypoint (a
        list, or /bin/sh -c STRING), and the /run/secrets/ files it reads."""
        ep = svc.get("entrypoint") or []
        if isinstance(ep, str):
            ep = shlex.split(ep)
        words = shlex.split(ep[2]) if len(ep) == 3 and ep[1] == "-c" else list(ep)
        words += list(svc.get("command") or [])
        for i, w in enumerate(words):
            if w.split("/")[-1] == name:
                text = " ".join(ep) if ep else ""
                return words[i + 1:], set(re.findall(r"/run/secrets/([A-Za-z0-9_.-]+)", text))
        self.fault(where, f"the entrypoint does not run {name}")
        return [], set()

    def server_url(self, where, url):
        m = re.match(r"^http://([A-Za-z0-9.-]+):(\d+)/?$", url or "")
        if not m:
            self.fault(where, f"--server {url!r}: expected http://HOST:PORT")
            return None, None
        return m.group(1), int(m.group(2))

    # ---- Containerfile -----------------------------------------------------------------
    def containerfile(self):
        stages = re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", self.t["deploy/Containerfile"], re.M | re.I)
        self.stages = set(stages)
        for want in ("runtime", "tird", "tird-worker"):
            if want not in self.stages:
                self.fault("deploy/Containerfile", f"no stage (target) {want}")

    # ---- compose -----------------------------------------------------------------------
    def compose(self):
        w = "deploy/compose.yaml"
        doc = self.load(w) or {}
        services = doc.get("services") or {}
        secrets = doc.get("secrets") or {}
        configs = doc.get("configs") or {}
        ignored = [l.strip() for l in self.t[".gitignore"].splitlines()]
        if "/deploy/secrets/" not in ignored and "deploy/secrets/" not in ignored:
            self.fault(".gitignore", "does not ignore /deploy/secrets/ (the compose secrets)")
        for name, s in secrets.items():
            f = (s or {}).get("file", "")
            if not f.startswith("./secrets/"):
                self.fault(w, f"secret {name}: file {f!r} is not under ./secrets/ (git-ignored)")
            elif f[len("./secrets/"):] not in self.t["deploy/make-secrets.sh"]:
                self.fault(w, f"secret {name}: deploy/make-secrets.sh does not write {f}")

        def svc_secrets(sname, svc, read):
            mounted = set(svc.get("secrets") or [])
            for s in mounted - set(secrets):
                self.fault(w, f"service {sname}: secret {s} is not defined under secrets:")
            for s in read - mounted:
                self.fault(w, f"service {sname}: reads /run/secrets/{s}, which it does not mount")
            return mounted

        def dep(sname, svc, on, cond):
            d = (svc.get("depends_on") or {})
            if isinstance(d, list) or on not in d:
                self.fault(w, f"service {sname}: does not depend on {on} (condition {cond})")
            elif (d[on] or {}).get("condition") != cond:
                self.fault(w, f"service {sname}: depends on {on} with condition "
                              f"{(d[on] or {}).get('condition')}, expected {cond}")

        def target(svc):
            b = svc.get("build") or {}
            return b.get("target") if isinstance(b, dict) else None

        for sname, svc in services.items():
            b = svc.get("build")
            if isinstance(b, dict):
                if b.get("dockerfile") != "deploy/Containerfile" or b.get("context") != "..":
                    self.fault(w, f"service {sname}: build is not deploy/Containerfile in the repository")
                if b.get("target") not in self.stages:
                    self.fault(w, f"service {sname}: build target {b.get('target')} is no Containerfile stage")

        # postgres
        pg = services.get("postgres")
        if not pg:
            self.fault(w, "no service postgres")
            pg = {}
        if not str(pg.get("image", "")).startswith("postgres:15"):
            self.fault(w, f"postgres: image {pg.get('image')}, expected postgres:15")
        hc = " ".join(map(str, (pg.get("healthcheck") or {}).get("test") or []))
        if "pg_isready" not in hc:
            self.fault(w, "postgres: no healthcheck with pg_isready")
        env = pg.get("environment") or {}
        pwfile = env.get("POSTGRES_PASSWORD_FILE", "")
        m = re.match(r"^/run/secrets/(\S+)$", pwfile)
        svc_secrets("postgres", pg, {m.group(1)} if m else set())
        if not m:
            self.fault(w, "postgres: POSTGRES_PASSWORD_FILE is not a /run/secrets/ file")

        # the replicas and their config
        replicas = {n: s for n, s in services.items() if target(s) == "tird"}
        if len(replicas) < 2:
            self.fault(w, f"{len(replicas)} tird replica(s) (build target tird), expected 2")
        cw = "deploy/tird.compose.conf"
        conf = self.conf(cw, self.t[cw])
        port = self.listen_port(cw, conf)
        dbm = re.match(r"^postgresql://([^:@/]+)@([^:/]+):(\d+)/([^?]+)", conf.get("db", ""))
        if not dbm:
            self.fault(cw, f"db = {conf.get('db')!r}: expected postgresql://USER@HOST:PORT/DB (no password)")
        else:
            user, host, dbport, db = dbm.groups()
            if host != "postgres":
                self.fault(cw, f"db: host {host} is not the postgres service")
            if dbport != "5432":
                self.fault(cw, f"db: port {dbport}, postgres listens on 5432")
            if env.get("POSTGRES_USER") != user or env.get("POSTGRES_DB") != db:
                self.fault(w, f"postgres: POSTGRES_USER / POSTGRES_DB are not {user} / {db} of {cw}")
        if conf.get("local_workers") != "none":
            self.fault(cw, "local_workers is not none (the worker services measure)")
        for sname, svc in replicas.items():
            where = f"service {sname}"
            args, read = self.shell_program(w, svc, "tird")
            fl = self.flags(f"{w}: {where}", args, self.tird_flags)
            mounted = svc_secrets(sname, svc, read)
            mounts = {c.get("target"): c.get("source") for c in svc.get("configs") or []}
            cpath = fl.get("--config")
            if not cpath or cpath not in mounts:
                self.fault(w, f"{where}: --config {cpath} is not a mounted config")
            elif (configs.get(mounts[cpath]) or {}).get("file") != "./tird.compose.conf":
                self.fault(w, f"{where}: its config is not ./tird.compose.conf")
            if "db_password" not in read:
                self.fault(w, f"{where}: does not give libpq the password (/run/secrets/db_password)")
            if m and m.group(1) not in read:
                self.fault(w, f"{where}: does not read postgres' password file {m.group(1)}")
            tf = re.match(r"^/run/secrets/(\S+)$", conf.get("token_file", ""))
            if not tf or tf.group(1) not in mounted:
                self.fault(w, f"{where}: token_file {conf.get('token_file')} is not a secret it mounts")
            hc = " ".join(map(str, (svc.get("healthcheck") or {}).get("test") or []))
            if f"http://127.0.0.1:{port}/healthz" not in hc:
                self.fault(w, f"{where}: healthcheck {hc!r} does not ask /healthz on port {port}")
            dep(sname, svc, "postgres", "service_healthy")
            if svc.get("ports"):
                self.fault(w, f"{where}: publishes ports; only the lb should")

        # the load balancer
        lbs = {n: s for n, s in services.items() if str(s.get("image", "")).startswith("haproxy")}
        if len(lbs) != 1:
            self.fault(w, f"{len(lbs)} haproxy services, expected 1")
            lbname, lb = None, {}
        else:
            (lbname, lb), = lbs.items()
        if not any(str(v).startswith("./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg")
                   for v in lb.get("volumes") or []):
            self.fault(w, f"service {lbname}: ./haproxy.cfg is not mounted as haproxy's config")
        bind = self.haproxy(replicas, port)
        published = [str(p) for p in lb.get("ports") or []]
        if f"8642:{bind}" not in published:
            self.fault(w, f"service {lbname}: ports {published}, expected 8642:{bind} (haproxy binds {bind})")
        for r in replicas:
            dep(lbname, lb, r, "service_healthy")

        # the worker
        workers = {n: s for n, s in services.items() if target(s) == "tird-worker"}
        if not workers:
            self.fault(w, "no worker service (build target tird-worker)")
        for sname, svc in workers.items():
            where = f"service {sname}"
            args, read = self.shell_program(w, svc, "tird-worker")
            fl = self.flags(f"{w}: {where}", args, self.worker_flags)
            svc_secrets(sname, svc, read)
            host, p = self.server_url(f"{w}: {where}", fl.get("--server"))
            if host is not None and (host != lbname or p != bind):
                self.fault(w, f"{where}: --server {fl.get('--server')} is not the lb ({lbname}:{bind})")
            if fl.get("--target") != "cpu":
                self.fault(w, f"{where}: --target {fl.get('--target')}, expected cpu")
            if not read or "TIRD_TOKEN=" not in " ".join(svc.get("entrypoint") or []):
                self.fault(w, f"{where}: no TIRD_TOKEN from a secret file")
            if lbname:
                dep(sname, svc, lbname, "service_started")

    def haproxy(self, replicas, port):
        w = "deploy/haproxy.cfg"
        sections, cur = [], None
        for line in self.t[w].splitlines():
            line = line.split("#", 1)[0].rstrip()
            if not line.strip():
                continue
            if not line[0].isspace():
                words = line.split()
                cur = (words[0], words[1] if len(words) > 1 else "", [])
                sections.append(cur)
            elif cur:
                cur[2].append(line.split())
        defaults_check = any(d[:1] == ["default-server"] and "check" in d
                             for kind, _, ds in sections if kind == "defaults" for d in ds)
        backends = {n: ds for kind, n, ds in sections if kind == "backend"}
        fronts = [ds for kind, _, ds in sections if kind == "frontend"]
        bind = None
        if len(fronts) != 1:
            self.fault(w, f"{len(fronts)} frontends, expected 1")
        for ds in fronts[:1]:
            binds = [d[1] for d in ds if d[0] == "bind"]
            m = re.match(r"^[^:]*:(\d+)$", binds[0]) if binds else None
            if not m:
                self.fault(w, "the frontend binds no :PORT")
            else:
                bind = int(m.group(1))
            used = [d[1] for d in ds if d[0] in ("use_backend", "default_backend")]
            for b in used:
                if b not in backends:
                    self.fault(w, f"backend {b} is used but not defined")
            if not any(d[0] == "default_backend" for d in ds):
                self.fault(w, "the frontend has no default_backend")
            for d in ds:
                if d[0] == "use_backend":
                    self.fault(w, f"`{' '.join(d)}`: routes split between backends; one "
                                  "round-robin backend serves every route, the workers' too")
        for b, ds in backends.items():
            bal = [d for d in ds if d[0] == "balance"]
            if bal != [["balance", "roundrobin"]]:
                self.fault(w, f"backend {b}: {[' '.join(d) for d in bal]}, expected `balance "
                              "roundrobin` (no replica needs to see a client's requests)")
            for d in ds:
                if d[0] in ("stick", "stick-table", "cookie") or \
                        (d[0] == "server" and "cookie" in d):
                    self.fault(w, f"backend {b}: `{' '.join(d)}` makes it sticky, which "
                                  "nothing needs (the workers live in the database)")
        want = {f"{r}:{port}" for r in replicas}
        for b, ds in backends.items():
            if ["option", "httpchk", "GET", "/healthz"] not in ds:
                self.fault(w, f"backend {b}: no `option httpchk GET /healthz`")
            if ["http-check", "expect", "status", "200"] not in ds:
                self.fault(w, f"backend {b}: no `http-check expect status 200`")
            servers = [d for d in ds if d[0] == "server"]
            got = {d[2] for d in servers if len(d) > 2}
            if got != want:
                self.fault(w, f"backend {b}: servers {sorted(got)}, expected the replicas {sorted(want)}")
            for d in servers:
                if not defaults_check and "check" not in d:
                    self.fault(w, f"backend {b}: server {d[1]} is not health-checked")
        return bind

    # ---- Kubernetes --------------------------------------------------------------------
    def k8s(self):
        objs = {}
        want = {
            "deploy/k8s/configmap.yaml": [("v1", "ConfigMap")],
            "deploy/k8s/secret.yaml": [("v1", "Secret")],
            "deploy/k8s/deployment.yaml": [("apps/v1", "Deployment")],
            "deploy/k8s/service.yaml": [("v1", "Service")],
            "deploy/k8s/worker-daemonset.yaml": [("apps/v1", "DaemonSet")],
        }
        for f, kinds in want.items():
            docs = self.load(f, many=True)
            got = [(d.get("apiVersion"), d.get("kind")) for d in docs if isinstance(d, dict)]
            if got != kinds:
                self.fault(f, f"objects {got}, expected {kinds}")
            for d in docs:
                if isinstance(d, dict):
                    objs.setdefault(d.get("kind"), []).append(d)
                    if not (d.get("metadata") or {}).get("name"):
                        self.fault(f, f"a {d.get('kind')} without metadata.name")

        def one(kind):
            return (objs.get(kind) or [{}])[0]

        cm, sec, dep, ds = one("ConfigMap"), one("Secret"), one("Deployment"), one("DaemonSet")
        cmname = (cm.get("metadata") or {}).get("name")
        secname = (sec.get("metadata") or {}).get("name")

        # the ConfigMap
        cw = "deploy/k8s/configmap.yaml"
        cmdata = cm.get("data") or {}
        if "tird.conf" not in cmdata:
            self.fault(cw, "no key tird.conf")
        conf = self.conf(f"{cw} tird.conf", cmdata.get("tird.conf", ""))
        port = self.listen_port(cw, conf)
        if conf.get("local_workers") != "none":
            self.fault(cw, "local_workers is not none (the DaemonSet's workers measure)")

        # the Secret
        sw = "deploy/k8s/secret.yaml"
        sdata = dict(sec.get("stringData") or {})
        sdata.update({k: None for k in (sec.get("data") or {})})
        for k, v in sdata.items():
            if v is not None and "CHANGE-ME" not in v:
                self.fault(sw, f"{k}: not marked as a placeholder (CHANGE-ME)")
        tokens = {}
        for line in (sdata.get("tokens") or "").splitlines():
            words = line.split()
            if words:
                scopes = set(words[1].split(",")) if len(words) > 1 else set(SCOPES)
                if len(words[0]) < 8:
                    self.fault(sw, f"tokens: {words[0]!r} is shorter than 8 characters (tird refuses it)")
                if scopes - SCOPES:
                    self.fault(sw, f"tokens: scopes {sorted(scopes - SCOPES)} are not tird's")
                tokens[words[0]] = scopes
        if not str(sdata.get("db-url") or "").startswith("postgresql://"):
            self.fault(sw, "db-url is not a postgresql:// URL")

        def env_secret(where, container, var):
            for e in container.get("env") or []:
                if e.get("name") == var:
                    ref = (e.get("valueFrom") or {}).get("secretKeyRef") or {}
                    if ref.get("name") != secname or ref.get("key") not in sdata:
                        self.fault(where, f"env {var}: secretKeyRef {ref.get('name')}/{ref.get('key')} "
                                          f"is not a key of the Secret {secname} ({sorted(sdata)})")
                        return None
                    return ref["key"]
            self.fault(where, f"no env {var} from the Secret")
            return None

        # the Deployment
        dw = "deploy/k8s/deployment.yaml"
        spec = dep.get("spec") or {}
        if spec.get("replicas") != 2:
            self.fault(dw, f"replicas {spec.get('replicas')}, expected 2")
        pod = (spec.get("template") or {}).get("spec") or {}
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        match = (spec.get("selector") or {}).get("matchLabels") or {}
        if not match or any(labels.get(k) != v for k, v in match.items()):
            self.fault(dw, "selector.matchLabels do not match the pod template's labels")
        self.pod_user(dw, pod)
        cs = pod.get("containers") or [{}]
        c = cs[0]
        fl = self.flags(dw, [str(a) for a in c.get("args") or []], self.tird_flags)
        ports = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
        if port not in ports.values():
            self.fault(dw, f"containerPort {sorted(map(str, ports.values()))} is not tird's listen port {port}")

        def resolve(p):
            return ports.get(p) if isinstance(p, str) else p

        for probe in ("readinessProbe", "livenessProbe"):
            h = (c.get(probe) or {}).get("httpGet")
            if not h:
                self.fault(dw, f"no {probe} (httpGet)")
                continue
            if h.get("path") != "/healthz":
                self.fault(dw, f"{probe}: path {h.get('path')}, expected /healthz")
            if resolve(h.get("port")) != port:
                self.fault(dw, f"{probe}: port {h.get('port')} is not tird's listen port {port}")
        res = c.get("resources") or {}
        if not (res.get("requests") or {}).get("cpu") or not (res.get("requests") or {}).get("memory"):
            self.fault(dw, "no resources.requests cpu and memory")
        mounts = c.get("volumeMounts") or []
        vols = {v.get("name"): v for v in pod.get("volumes") or []}
        cpath = fl.get("--config")
        cmount = [m for m in mounts if m.get("mountPath") == cpath]
        if not cmount:
            self.fault(dw, f"--config {cpath} is not a volumeMount")
        else:
            v = vols.get(cmount[0].get("name")) or {}
            if (v.get("configMap") or {}).get("name") != cmname:
                self.fault(dw, f"--config {cpath}: volume {cmount[0].get('name')} is not the ConfigMap {cmname}")
            if cmount[0].get("subPath") not in cmdata:
                self.fault(dw, f"--config {cpath}: subPath {cmount[0].get('subPath')} is no ConfigMap key")
        key = env_secret(dw, c, "TIRD_DB")
        if key and fl.get("--db") != "$(TIRD_DB)":
            self.fault(dw, "--db is not $(TIRD_DB), the Secret's URL")
        if key and key != "db-url":
            self.fault(dw, f"TIRD_DB from the Secret's {key}, not db-url")
        tf = conf.get("token_file", "")
        found = False
        for m in mounts:
            mp = m.get("mountPath", "").rstrip("/") + "/"
            v = vols.get(m.get("name")) or {}
            if tf.startswith(mp) and v.get("secret"):
                found = True
                if v["secret"].get("secretName") != secname:
                    self.fault(dw, f"token_file {tf}: volume {m.get('name')} is not the Secret {secname}")
                items = {i.get("path"): i.get("key") for i in v["secret"].get("items") or []}
                rel = tf[len(mp):]
                k = items.get(rel, rel if not items else None)
                if k not in sdata:
                    self.fault(dw, f"token_file {tf}: the Secret volume takes {rel} from key {k}, "
                                   f"not a key of the Secret ({sorted(sdata)})")
        if not tf or not found:
            self.fault(dw, f"token_file {tf!r} (ConfigMap) is not under a mounted Secret volume")

        # the Services
        vw = "deploy/k8s/service.yaml"
        svcs = {(s.get("metadata") or {}).get("name"): s for s in objs.get("Service") or []}
        for name, s in svcs.items():
            sp = s.get("spec") or {}
            sel = sp.get("selector") or {}
            if not sel or any(labels.get(k) != v for k, v in sel.items()):
                self.fault(vw, f"Service {name}: selector {sel} does not select the tird pods")
            for p in sp.get("ports") or []:
                if resolve(p.get("targetPort")) != port:
                    self.fault(vw, f"Service {name}: targetPort {p.get('targetPort')} is not tird's port {port}")
        for name, s in svcs.items():
            aff = (s.get("spec") or {}).get("sessionAffinity")
            if aff not in (None, "None"):
                self.fault(vw, f"Service {name}: sessionAffinity {aff}, which nothing needs "
                               "(any replica answers any client or worker)")

        # the DaemonSet
        ww = "deploy/k8s/worker-daemonset.yaml"
        dspec = ds.get("spec") or {}
        dpod = (dspec.get("template") or {}).get("spec") or {}
        dlabels = ((dspec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        dmatch = (dspec.get("selector") or {}).get("matchLabels") or {}
        if not dmatch or any(dlabels.get(k) != v for k, v in dmatch.items()):
            self.fault(ww, "selector.matchLabels do not match the pod template's labels")
        if not any("gpu" in k for k in (dpod.get("nodeSelector") or {})):
            self.fault(ww, "no nodeSelector for GPU nodes")
        self.pod_user(ww, dpod)
        wc = (dpod.get("containers") or [{}])[0]
        if not ((wc.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu"):
            self.fault(ww, "no resources.limits nvidia.com/gpu")
        wf = self.flags(ww, [str(a) for a in wc.get("args") or []], self.worker_flags)
        if wf.get("--target") != "cuda":
            self.fault(ww, f"--target {wf.get('--target')}, expected cuda")
        host, p = self.server_url(ww, wf.get("--server"))
        if host is not None:
            sp = (svcs.get(host) or {}).get("spec") or {}
            if host not in svcs:
                self.fault(ww, f"--server {wf.get('--server')}: {host} is not a Service of "
                               f"service.yaml ({sorted(svcs)})")
            elif p not in [q.get("port") for q in sp.get("ports") or []]:
                self.fault(ww, f"--server {wf.get('--server')}: Service {host} has no port {p}")
        tk = env_secret(ww, wc, "TIRD_TOKEN")
        if tk:
            val = (sec.get("stringData") or {}).get(tk)
            if val is not None and "worker" not in tokens.get(val.strip(), set()):
                self.fault(sw, f"{tk} is not one of tokens with scope worker")

    def pod_user(self, where, pod):
        sc = pod.get("securityContext") or {}
        if sc.get("runAsNonRoot") and not isinstance(sc.get("runAsUser"), int):
            self.fault(where, "runAsNonRoot without a numeric runAsUser (the image's user is a name)")

    def run(self):
        self.containerfile()
        self.compose()
        self.k8s()
        return self.faults


# (file, text, replacement, a word the fault must name)
MUTATIONS = [
    ("deploy/compose.yaml", '"http://127.0.0.1:8642/healthz"', '"http://127.0.0.1:8643/healthz"', "healthcheck"),
    ("deploy/compose.yaml", '"http://127.0.0.1:8642/healthz"', '"http://127.0.0.1:8642/health"', "healthz"),
    ("deploy/compose.yaml", "postgres:\n      condition: service_healthy", "postgres:\n      condition: service_started", "postgres"),
    ("deploy/compose.yaml", '["CMD", "pg_isready", "-U", "tird", "-d", "tird"]', '["CMD", "true"]', "pg_isready"),
    ("deploy/compose.yaml", "image: postgres:15", "image: postgres:latest", "postgres:15"),
    ("deploy/compose.yaml", "POSTGRES_DB: tird", "POSTGRES_DB: tuning", "POSTGRES_DB"),
    ("deploy/compose.yaml", "--server http://lb:8642", "--server http://tird-a:8642", "lb"),
    ("deploy/compose.yaml", "cat /run/secrets/worker_token", "cat /run/secrets/worker_tokn", "worker_tokn"),
    ("deploy/compose.yaml", "file: ./secrets/db_password", "file: ./db_password", "./secrets/"),
    ("deploy/compose.yaml", '"8642:8642"', '"8642:8080"', "8642:8642"),
    ("deploy/compose.yaml", "  tird-b:\n    <<: *tird", "  tird-c:\n    <<: *tird", "tird-c"),
    ("deploy/compose.yaml", "tird-b:\n        condition: service_healthy", "tird-b:\n        condition: service_started", "tird-b"),
    ("deploy/compose.yaml", "--target cpu --name", "--targte cpu --name", "--targte"),
    ("deploy/compose.yaml", "target: tird-worker", "target: worker", "worker"),
    ("deploy/compose.yaml", "      target: /etc/tird/tird.conf", "      target: /etc/tird.conf", "--config"),
    ("deploy/haproxy.cfg", "server tird-b tird-b:8642", "server tird-b tird-b:8643", "tird-b:8643"),
    ("deploy/haproxy.cfg", "balance roundrobin\n    option httpchk GET /healthz", "balance roundrobin\n    option httpchk GET /", "httpchk"),
    ("deploy/haproxy.cfg", "balance roundrobin", "balance source", "roundrobin"),
    ("deploy/haproxy.cfg", "    balance roundrobin\n", "    balance roundrobin\n    stick-table type ip size 1m\n"
     "    stick on src\n", "sticky"),
    ("deploy/haproxy.cfg", "    default_backend tird\n", "    acl worker_route path_beg /v1/workers\n"
     "    use_backend tird if worker_route\n    default_backend tird\n", "split"),
    ("deploy/haproxy.cfg", "default_backend tird", "default_backend tird_api", "tird_api"),
    ("deploy/haproxy.cfg", "bind :8642", "bind :8080", "8642:8080"),
    ("deploy/haproxy.cfg", "default-server check inter", "default-server inter", "health-checked"),
    ("deploy/tird.compose.conf", "lease_s = 15", "lease_secs = 15", "lease_secs"),
    ("deploy/tird.compose.conf", "listen = 0.0.0.0:8642", "listen = 0.0.0.0:9000", "9000"),
    ("deploy/tird.compose.conf", "@postgres:5432", "@db:5432", "host db"),
    ("deploy/tird.compose.conf", "token_file = /run/secrets/tird_tokens", "token_file = /run/secrets/tokens", "token_file"),
    ("deploy/tird.compose.conf", "local_workers = none", "local_workers = auto", "local_workers"),
    ("deploy/Containerfile", "AS tird-worker", "AS worker", "tird-worker"),
    (".gitignore", "/deploy/secrets/", "/deploy/secret/", "/deploy/secrets/"),
    ("deploy/k8s/configmap.yaml", "tuning_threads = 2", "tuning_thread = 2", "tuning_thread"),
    ("deploy/k8s/configmap.yaml", "token_file = /etc/tird/secret/tokens", "token_file = /etc/tird/secrets/tokens", "token_file"),
    ("deploy/k8s/configmap.yaml", "listen = 0.0.0.0:8642", "listen = 127.0.0.1:8642", "0.0.0.0"),
    ("deploy/k8s/secret.yaml", '  worker-token: "CHANGE-ME-WORKER-TOKEN"', '  worker_token: "CHANGE-ME-WORKER-TOKEN"', "worker-token"),
    ("deploy/k8s/secret.yaml", '  worker-token: "CHANGE-ME-WORKER-TOKEN"', '  worker-token: "CHANGE-ME-WORKER-TOKEN2"', "scope worker"),
    ("deploy/k8s/secret.yaml", "CHANGE-ME-CI-TOKEN read,submit ci", "CHANGE-ME-CI-TOKEN read,write ci", "write"),
    ("deploy/k8s/secret.yaml", "CHANGE-ME-ADMIN-TOKEN admin", "CHANGE admin", "shorter"),
    ("deploy/k8s/secret.yaml", "apiVersion: v1", "apiVersion: apps/v1", "Secret"),
    ("deploy/k8s/deployment.yaml", "              path: /healthz\n              port: http\n            initialDelaySeconds: 2",
     "              path: /ready\n              port: http\n            initialDelaySeconds: 2", "/ready"),
    ("deploy/k8s/deployment.yaml", "          livenessProbe:", "          startupProbe:", "livenessProbe"),
    ("deploy/k8s/deployment.yaml", "containerPort: 8642", "containerPort: 8080", "containerPort"),
    ("deploy/k8s/deployment.yaml", "key: db-url", "key: db_url", "db_url"),
    ("deploy/k8s/deployment.yaml", "name: tird-config", "name: tird-conf", "ConfigMap"),
    ("deploy/k8s/deployment.yaml", "apiVersion: apps/v1", "apiVersion: v1", "Deployment"),
    ("deploy/k8s/deployment.yaml", "replicas: 2", "replicas: 1", "replicas"),
    ("deploy/k8s/deployment.yaml", '"--config", "/etc/tird/tird.conf"', '"--conf", "/etc/tird/tird.conf"', "--conf"),
    ("deploy/k8s/deployment.yaml", '"--db", "$(TIRD_DB)"', '"--db", "$(TIRD_DATABASE)"', "--db"),
    ("deploy/k8s/deployment.yaml", "              - key: tokens\n", "              - key: token\n", "token_file"),
    ("deploy/k8s/deployment.yaml", "        runAsUser: 10001", "        runAsUser: tird", "runAsUser"),
    ("deploy/k8s/service.yaml", "  type: ClusterIP\n", "  type: ClusterIP\n  sessionAffinity: ClientIP\n",
     "sessionAffinity"),
    ("deploy/k8s/service.yaml", "targetPort: http", "targetPort: 8080", "targetPort"),
    ("deploy/k8s/service.yaml", "  selector:\n    app.kubernetes.io/name: tird\n  ports",
     "  selector:\n    app.kubernetes.io/name: tird-worker\n  ports", "selector"),
    ("deploy/k8s/worker-daemonset.yaml", '"--target", "cuda"', '"--target", "cpu"', "cuda"),
    ("deploy/k8s/worker-daemonset.yaml", "              nvidia.com/gpu: 1\n", "", "nvidia.com/gpu"),
    ("deploy/k8s/worker-daemonset.yaml", "http://tird:8642", "http://tird-workers:8642", "tird-workers"),
    ("deploy/k8s/worker-daemonset.yaml", "http://tird:8642", "http://tird:8643", "8643"),
    ("deploy/k8s/worker-daemonset.yaml", 'nvidia.com/gpu.present: "true"', 'kubernetes.io/os: linux', "nodeSelector"),
    ("deploy/k8s/worker-daemonset.yaml", "key: worker-token", "key: worker-tokens", "worker-tokens"),
]


def main():
    if len(sys.argv) not in (4, 5) or (len(sys.argv) == 5 and sys.argv[4] != "--mutate"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    src = sys.argv[1]
    verbose = bool(os.environ.get("DEPLOY_CHECK_VERBOSE"))
    with open(sys.argv[2], encoding="utf-8") as f:
        tird_help = f.read()
    with open(sys.argv[3], encoding="utf-8") as f:
        worker_help = f.read()
    texts = {}
    for name in FILES:
        with open(f"{src}/{name}", encoding="utf-8") as f:
            texts[name] = f.read()
    fails = 0
    faults = Checker(texts, tird_help, worker_help).run()
    for x in faults:
        print("FAIL " + x)
        fails += 1
    if not faults:
        print(f"PASS deploy/ wiring: {len(FILES)} files")
    if len(sys.argv) == 5 and not faults:
        caught = 0
        for i, (name, old, new, word) in enumerate(MUTATIONS, 1):
            t = copy.deepcopy(texts)
            n = t[name].count(old)
            if n != 1:
                print(f"FAIL mutation {i} ({name}): {old!r} is there {n} times, expected once")
                fails += 1
                continue
            t[name] = t[name].replace(old, new)
            got = Checker(t, tird_help, worker_help).run()
            hit = [g for g in got if word in g]
            if hit:
                caught += 1
                if verbose:
                    print(f"  mutation {i} ({name}): {hit[0]}")
            else:
                print(f"FAIL mutation {i} ({name}: {old!r} -> {new!r}) not caught "
                      f"(wanted a fault naming {word!r}; got {got})")
                fails += 1
        print(f"{'PASS' if caught == len(MUTATIONS) else 'FAIL'} mutations caught: "
              f"{caught} of {len(MUTATIONS)}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
