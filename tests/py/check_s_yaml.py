"""Check s.yaml (Serverless Devs 3, component fc3) for what Function Compute 3.0 requires of
floe's functions: every function a custom runtime serving port 9000 with the packaged
`bootstrap`, a role, a timeout the handlers are told about, the config, and the triggers floe
is deployed with (OSS, MNS topic, timer, HTTP) each with the fields FC needs.

Usage: python check_s_yaml.py s.yaml   (exit 1 and one line per problem when something is off)
"""

import sys

import yaml

RUNTIMES = {"custom", "custom.debian10", "custom.debian11", "custom.debian12"}
FUNCTIONS = {"ingest", "poll", "commit", "backfill"}
TRIGGER_FIELDS = {
    "oss": {"sourceArn", "invocationRole"},
    "mns_topic": {"sourceArn", "invocationRole"},
    "timer": set(),
    "http": set(),
}
TRIGGER_CONFIG = {
    "oss": {"events", "filter"},
    "mns_topic": {"notifyContentFormat", "notifyStrategy"},
    "timer": {"cronExpression", "enable"},
    "http": {"authType", "methods"},
}


def check(doc):
    problems = []
    if str(doc.get("edition")) != "3.0.0":
        problems.append("edition must be 3.0.0 (Serverless Devs 3, fc3)")
    resources = doc.get("resources") or {}
    packaged = set()
    trigger_types = set()
    for name, res in resources.items():
        where = f"resources.{name}"
        if res.get("component") != "fc3":
            problems.append(f"{where}.component must be fc3")
            continue
        p = res.get("props") or {}
        for key in ("region", "functionName", "runtime", "code", "handler", "role",
                    "timeout", "memorySize", "customRuntimeConfig", "environmentVariables"):
            if p.get(key) in (None, ""):
                problems.append(f"{where}.props.{key} is missing")
        if p.get("runtime") not in RUNTIMES:
            problems.append(f"{where}.props.runtime must be a custom runtime, got {p.get('runtime')!r}")
        crc = p.get("customRuntimeConfig") or {}
        if crc.get("port") != 9000:
            problems.append(f"{where}.props.customRuntimeConfig.port must be 9000")
        if crc.get("command") != ["/code/bootstrap"]:
            problems.append(f"{where}.props.customRuntimeConfig.command must be [/code/bootstrap]")
        code = str(p.get("code", ""))
        fn = code.rstrip("/").rsplit("/", 1)[-1]
        if not code.startswith("./dist/fc/") or fn not in FUNCTIONS:
            problems.append(f"{where}.props.code must be ./dist/fc/<function>, got {code!r}")
        packaged.add(fn)
        env = p.get("environmentVariables") or {}
        if "FLOE_CONFIG_TOML" not in env and "FLOE_CONFIG" not in env:
            problems.append(f"{where}: no FLOE_CONFIG_TOML or FLOE_CONFIG in environmentVariables")
        if str(env.get("FLOE_TIMEOUT_SECS")) != str(p.get("timeout")):
            problems.append(f"{where}: FLOE_TIMEOUT_SECS must equal timeout ({p.get('timeout')})")
        triggers = p.get("triggers") or []
        if not triggers:
            problems.append(f"{where}.props.triggers is empty")
        for i, t in enumerate(triggers):
            tw = f"{where}.props.triggers[{i}]"
            kind = t.get("triggerType")
            if kind not in TRIGGER_FIELDS:
                problems.append(f"{tw}.triggerType {kind!r} is not one floe deploys")
                continue
            trigger_types.add(kind)
            for key in {"triggerName", "triggerConfig"} | TRIGGER_FIELDS[kind]:
                if t.get(key) in (None, ""):
                    problems.append(f"{tw}.{key} is missing")
            cfg = t.get("triggerConfig") or {}
            for key in TRIGGER_CONFIG[kind]:
                if key not in cfg:
                    problems.append(f"{tw}.triggerConfig.{key} is missing")
    if packaged != FUNCTIONS:
        problems.append(f"functions deployed {sorted(packaged)}, expected {sorted(FUNCTIONS)}")
    for kind in TRIGGER_FIELDS:
        if kind not in trigger_types:
            problems.append(f"no {kind} trigger")
    return problems


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "s.yaml"
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    problems = check(doc)
    for p in problems:
        print(f"{path}: {p}")
    if problems:
        sys.exit(1)
    print(f"{path}: ok ({len(doc['resources'])} functions)")


if __name__ == "__main__":
    main()
