"""Render the environment the deployment templates give each function, as JSON, so that tests can
feed it to floe's own config parser and binaries.

template.yaml (AWS SAM): each AWS::Serverless::Function gets Globals.Function.Environment.Variables
merged with its own Properties.Environment.Variables (the function's keys win); its binary is
Metadata.BuildProperties.Binary. Parameters take their Default unless --param gives them (checked
against AllowedValues and AllowedPattern). Conditions are evaluated from them, and so are Rules: a
failing assertion is an error with its AssertDescription. Intrinsics, short (!Sub) or long
(Fn::Sub): Ref; Fn::Sub, string or [template, {vars}], with ${Param}, ${AWS::Region}-style pseudo
parameters, ${Res.Attr} as GetAtt and ${!Literal} escapes; Fn::Join, Fn::If, Fn::GetAtt,
Fn::Select, Fn::Split; in Conditions and Rules Fn::Equals, Fn::Not, Fn::And, Fn::Or, Condition.
Ref AWS::NoValue removes the key or list item. A resource's Ref or GetAtt is what --resource-value
or --attr says (an error when needed and not given); referring to a resource whose Condition is
false is an error, as CloudFormation refuses it. Dynamic references ({{resolve:...}}) are left as
written: CloudFormation resolves them at deploy time. Not a CloudFormation engine: no
Fn::FindInMap, Fn::ImportValue, Fn::GetAZs, Fn::Base64, Fn::Cidr, Mappings, rule-only functions
(Fn::Contains, ...), nothing of the SAM transform but Globals for functions' environment, and no
check of resource properties.

s.yaml (Serverless Devs 3, fc3): YAML anchors and << merge keys (PyYAML), then ${...} in every
string of the document: ${env('NAME')} (from --env only, never this process's environment, so
renders are reproducible), ${config('Key')} (from --config), ${vars.name} (vars may refer to
vars; --var overrides one). Any other ${...} is an error: floe's route placeholders such as
${table_name} would be read by Serverless Devs too. A function's binary is floe- plus the basename
of props.code; its environment is props.environmentVariables, whose values must be strings.

Combinations: every combination of the values of the parameters that decide the Conditions the
functions use (AllowedValues, or the literals Fn::Equals compares them with plus a sample value),
or of the vars that are empty by default and appear in the functions' environment (empty, or a
sample); SAMPLES and COMPANIONS below give sample values and the settings that go with them.

Usage (stdout is JSON; exit 1 with the template, the path in it and the problem on any error):
  render_templates.py sam TEMPLATE [--param K=V] [--resource-value Logical=V]
                                   [--attr Logical.Attr=V] [--pseudo AWS::Region=V]
  render_templates.py fc S_YAML [--var K=V] [--env K=V] [--config AccountID=V]
  render_templates.py sam-combinations TEMPLATE ...   (the flags of sam; --param pins one)
  render_templates.py fc-combinations S_YAML ...      (the flags of fc; --var pins one)
  render_templates.py selftest
"""

import argparse
import copy
import itertools
import json
import re
import sys

import yaml

NOVALUE = object()  # what Ref AWS::NoValue evaluates to
PSEUDO = {"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012", "AWS::Partition": "aws",
          "AWS::StackName": "floe", "AWS::URLSuffix": "amazonaws.com"}
# Values a combination gives a parameter or var that is empty by default, to turn its feature on.
SAMPLES = {
    "MaxComputeEndpoint": "http://maxcompute.example",
    "TableBucketArn": "arn:aws:s3tables:us-east-1:123456789012:bucket/given",
    "prefix": "logs/",
    "maxcompute": '[maxcompute]\nendpoint = "http://maxcompute.example"\nproject = "floe_project"\n'
                  'table_name = "events"\n',
}
# Parameters (vars) given plausible values, unless pinned, when a combination sets (name, value);
# "*" is any non-empty value. Names the template does not declare are skipped.
COMPANIONS = {
    ("MaxComputeEndpoint", "*"): {"MaxComputeProject": "floe_project", "MaxComputeTable": "events",
                                  "MaxComputeSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:mc"},
    ("CatalogType", "rest"): {"CatalogUri": "https://s3tables.us-east-1.amazonaws.com/iceberg"},
    ("maxcompute", "*"): {"routeTargets": '["iceberg", "maxcompute"]'},
}
SUB_VAR = re.compile(r"\$\{([^}]*)\}")


class RenderError(Exception):
    def __init__(self, where, problem):
        super().__init__(f"{where}: {problem}")


def walk(x):
    yield x
    for child in (x.values() if isinstance(x, dict) else x if isinstance(x, list) else ()):
        yield from walk(child)


def scalar(v, where):
    """A value as CloudFormation writes it into a string."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (str, int, float)):
        return str(v)
    raise RenderError(where, "is AWS::NoValue" if v is NOVALUE else f"is {type(v).__name__} {v!r}, not a string")


# --- AWS SAM / CloudFormation -------------------------------------------------------------------

class CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short tags turned into their long forms (!Sub x -> {Fn::Sub: x})."""


def _short_tag(loader, suffix, node):
    key = suffix if suffix in ("Ref", "Condition") else "Fn::" + suffix
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        return {key: value.split(".", 1) if suffix == "GetAtt" else value}
    if isinstance(node, yaml.SequenceNode):
        return {key: loader.construct_sequence(node, deep=True)}
    return {key: loader.construct_mapping(node, deep=True)}


CfnLoader.add_multi_constructor("!", _short_tag)


def effective_params(doc, given):
    decl = doc.get("Parameters") or {}
    for name in given:
        if name not in decl:
            raise RenderError(f"--param {name}", "the template declares no such parameter")
    out = {}
    for name, spec in decl.items():
        where = f"Parameters.{name}"
        if name not in given and "Default" not in spec:
            raise RenderError(where, f"has no Default: pass --param {name}=...")
        v = scalar(given.get(name, spec.get("Default")), where)
        allowed = [scalar(a, where) for a in spec.get("AllowedValues") or []]
        if allowed and v not in allowed:
            raise RenderError(where, f"{v!r} is not one of the AllowedValues {allowed}")
        if "AllowedPattern" in spec and not re.fullmatch(spec["AllowedPattern"], v):
            raise RenderError(where, f"{v!r} does not match AllowedPattern {spec['AllowedPattern']}")
        out[name] = v
    return out


class Sam:
    def __init__(self, doc, params, resource_values, attrs, pseudo):
        self.doc, self.params, self.values, self.attrs = doc, params, resource_values, attrs
        self.resources = doc.get("Resources") or {}
        self.pseudo = {**PSEUDO, **pseudo}
        self.conditions, self.busy = {}, set()

    def condition(self, name, where):
        if name not in self.conditions:
            spec = (self.doc.get("Conditions") or {}).get(name)
            if spec is None or name in self.busy:
                raise RenderError(where, f"condition {name!r} " + ("refers to itself" if spec else "is not declared"))
            self.busy.add(name)
            self.conditions[name] = self.cond_expr(spec, f"Conditions.{name}")
        return self.conditions[name]

    def cond_expr(self, x, where):
        (key, arg), = x.items() if isinstance(x, dict) and len(x) == 1 else [(None, None)]
        if key == "Condition":
            return self.condition(arg, where)
        if key == "Fn::Equals" and isinstance(arg, list) and len(arg) == 2:
            a, b = (scalar(self.ev(v, f"{where}.{key}[{i}]"), where) for i, v in enumerate(arg))
            return a == b
        if key in ("Fn::Not", "Fn::And", "Fn::Or") and isinstance(arg, list):
            vs = [self.cond_expr(c, f"{where}.{key}[{i}]") for i, c in enumerate(arg)]
            return not vs[0] if key == "Fn::Not" else all(vs) if key == "Fn::And" else any(vs)
        raise RenderError(where, "is not a condition (Fn::Equals, Fn::Not, Fn::And, Fn::Or, Condition)")

    def ev(self, x, where):
        """Evaluate every intrinsic in x; NOVALUE when x is AWS::NoValue."""
        if isinstance(x, list):
            items = (self.ev(v, f"{where}[{i}]") for i, v in enumerate(x))
            return [v for v in items if v is not NOVALUE]
        if not isinstance(x, dict):
            return x
        if len(x) == 1:
            (key, arg), = x.items()
            if key == "Ref" or key.startswith("Fn::"):
                method = getattr(self, "fn_" + key.replace("Fn::", "").lower(), None)
                if method is None:
                    raise RenderError(where, f"{key} is not supported here (see render_templates.py's docstring)")
                return method(arg, f"{where}.{key}")
        out = {k: self.ev(v, f"{where}.{k}") for k, v in x.items()}
        return {k: v for k, v in out.items() if v is not NOVALUE}

    def resource(self, name, where):
        res = self.resources.get(name)
        if res is None:  # one the SAM transform generates (FooRole, FooUrl) may be given a value
            if name in self.values or any(a.startswith(name + ".") for a in self.attrs):
                return
            raise RenderError(where, f"no parameter or resource named {name!r}")
        cond = res.get("Condition")
        if cond and not self.condition(cond, where):
            raise RenderError(where, f"refers to resource {name}, which is not created (its Condition {cond} is false)")

    def fn_ref(self, name, where):
        if name == "AWS::NoValue":
            return NOVALUE
        if name in self.params:
            return self.params[name]
        if str(name).startswith("AWS::"):
            if name not in self.pseudo:
                raise RenderError(where, f"unknown pseudo parameter {name}")
            return self.pseudo[name]
        self.resource(name, where)
        if name not in self.values:
            raise RenderError(where, f"Ref {name} needs the resource's value: pass --resource-value {name}=...")
        return self.values[name]

    def fn_getatt(self, arg, where):
        if isinstance(arg, str):
            arg = arg.split(".", 1)
        if not (isinstance(arg, list) and len(arg) == 2):
            raise RenderError(where, "expected [Resource, Attribute] or Resource.Attribute")
        self.resource(arg[0], where)
        key = f"{arg[0]}.{scalar(self.ev(arg[1], where), where)}"
        if key not in self.attrs:
            raise RenderError(where, f"GetAtt {key} needs its value: pass --attr {key}=...")
        return self.attrs[key]

    def fn_sub(self, arg, where):
        if isinstance(arg, str):
            text, local = arg, {}
        elif isinstance(arg, list) and len(arg) == 2 and isinstance(arg[0], str) and isinstance(arg[1], dict):
            text = arg[0]
            local = {k: scalar(self.ev(v, f"{where}[1].{k}"), f"{where}[1].{k}") for k, v in arg[1].items()}
        else:
            raise RenderError(where, "expected a string or [template, {variables}]")

        def one(m):
            name = m.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in local:
                return local[name]
            is_att = "." in name and name not in self.params
            v = self.fn_getatt(name, where) if is_att else self.fn_ref(name, where)
            return scalar(v, f"{where}: ${{{name}}}")
        return SUB_VAR.sub(one, text)

    def fn_join(self, arg, where):
        if not (isinstance(arg, list) and len(arg) == 2):
            raise RenderError(where, "expected [delimiter, [values]]")
        items = self.ev(arg[1], f"{where}[1]")
        if not isinstance(items, list):
            raise RenderError(f"{where}[1]", "is not a list")
        return scalar(arg[0], where).join(scalar(v, f"{where}[1][{i}]") for i, v in enumerate(items))

    def fn_if(self, arg, where):
        if not (isinstance(arg, list) and len(arg) == 3 and isinstance(arg[0], str)):
            raise RenderError(where, "expected [ConditionName, value if true, value if false]")
        branch = 1 if self.condition(arg[0], where) else 2
        return self.ev(arg[branch], f"{where}[{branch}]")

    def fn_select(self, arg, where):
        index, items = int(scalar(self.ev(arg[0], where), where)), self.ev(arg[1], f"{where}[1]")
        if not isinstance(items, list) or not 0 <= index < len(items):
            raise RenderError(where, f"index {index} is outside {items!r}")
        return items[index]

    def fn_split(self, arg, where):
        return scalar(self.ev(arg[1], f"{where}[1]"), where).split(scalar(arg[0], where))


def render_sam(doc, param=(), resource_value=(), attr=(), pseudo=()):
    params = effective_params(doc, dict(param))
    sam = Sam(doc, params, dict(resource_value), dict(attr), dict(pseudo))
    conditions = {n: sam.condition(n, f"Conditions.{n}") for n in doc.get("Conditions") or {}}
    for name, rule in (doc.get("Rules") or {}).items():
        where = f"Rules.{name}"
        if "RuleCondition" in rule and not sam.cond_expr(rule["RuleCondition"], f"{where}.RuleCondition"):
            continue
        for i, a in enumerate(rule.get("Assertions") or []):
            if not sam.cond_expr(a.get("Assert"), f"{where}.Assertions[{i}].Assert"):
                raise RenderError(f"{where}.Assertions[{i}]", a.get("AssertDescription", "the assertion fails"))
    glob = (((doc.get("Globals") or {}).get("Function") or {}).get("Environment") or {}).get("Variables") or {}
    functions = {}
    for name, res in sam.resources.items():
        if res.get("Type") != "AWS::Serverless::Function":
            continue
        if res.get("Condition") and not sam.condition(res["Condition"], f"Resources.{name}.Condition"):
            continue  # not created
        binary = ((res.get("Metadata") or {}).get("BuildProperties") or {}).get("Binary")
        if not binary:
            raise RenderError(f"Resources.{name}.Metadata.BuildProperties.Binary", "is missing")
        own = (((res.get("Properties") or {}).get("Environment")) or {}).get("Variables") or {}
        env = {}
        for where, variables in (("Globals.Function.Environment.Variables", glob),
                                 (f"Resources.{name}.Properties.Environment.Variables", own)):
            if not isinstance(variables, dict):
                raise RenderError(where, "must be a mapping (an intrinsic here is not supported)")
            for k, v in variables.items():
                v = sam.ev(v, f"{where}.{k}")
                if v is NOVALUE:
                    env.pop(k, None)
                else:
                    env[k] = scalar(v, f"{where}.{k}")
        functions[name] = {"binary": binary, "env": env}
    return {"stack": "sam", "parameters": params, "conditions": conditions, "functions": functions}


def sam_axes(doc):
    """Parameters that decide the Conditions functions use, with the values worth trying."""
    conditions = doc.get("Conditions") or {}
    users = [(doc.get("Globals") or {}).get("Function")] + [
        r for r in (doc.get("Resources") or {}).values() if r.get("Type") == "AWS::Serverless::Function"]
    used, todo = set(), []
    for node in walk(users):
        if isinstance(node, dict) and isinstance(node.get("Fn::If"), list):
            todo.append(node["Fn::If"][0])
        if isinstance(node, dict) and isinstance(node.get("Condition"), str):
            todo.append(node["Condition"])
    while todo:  # and the conditions those refer to
        name = todo.pop()
        if name in conditions and name not in used:
            used.add(name)
            todo += [n["Condition"] for n in walk(conditions[name]) if isinstance(n, dict) and "Condition" in n]
    literals = {}  # parameter -> the literals Fn::Equals compares it with
    for node in walk([conditions[c] for c in used]):
        if isinstance(node, dict) and isinstance(node.get("Fn::Equals"), list) and len(node["Fn::Equals"]) == 2:
            for a, b in (node["Fn::Equals"], node["Fn::Equals"][::-1]):
                if isinstance(a, dict) and isinstance(a.get("Ref"), str) and not isinstance(b, (dict, list)):
                    literals.setdefault(a["Ref"], []).append(scalar(b, "Conditions"))
    axes = {}
    for name, spec in (doc.get("Parameters") or {}).items():
        if name in literals:
            values = [scalar(a, name) for a in spec.get("AllowedValues") or []] or sorted(set(literals[name]))
            if not spec.get("AllowedValues"):
                values.append(SAMPLES.get(name, f"example-{name}"))
            axes[name] = values
    return axes


# --- Serverless Devs (fc3) ----------------------------------------------------------------------

class Fc:
    def __init__(self, doc, var, env, config):
        self.raw_vars = dict(doc.get("vars") or {})
        for name, value in var:
            if name not in self.raw_vars:
                raise RenderError(f"--var {name}", "s.yaml declares no such var")
            self.raw_vars[name] = value
        self.env, self.config, self.vars, self.busy = dict(env), dict(config), {}, set()

    def var(self, name, where):
        if name not in self.vars:
            if name not in self.raw_vars or name in self.busy:
                raise RenderError(where, f"${{vars.{name}}}: " + ("refers to itself" if name in self.busy else "no such var"))
            self.busy.add(name)
            self.vars[name] = self.interpolate(self.raw_vars[name], f"vars.{name}")
            self.busy.discard(name)
        return self.vars[name]

    def interpolate(self, x, where):
        if isinstance(x, dict):
            return {k: self.interpolate(v, f"{where}.{k}" if where else str(k)) for k, v in x.items()}
        if isinstance(x, list):
            return [self.interpolate(v, f"{where}[{i}]") for i, v in enumerate(x)]
        if not isinstance(x, str):
            return x
        if "${" in SUB_VAR.sub("", x):
            raise RenderError(where, f"unterminated ${{ in {x!r}")

        def one(m):
            v = self.value(m.group(1), where)
            if isinstance(v, (dict, list)):
                raise RenderError(where, f"${{{m.group(1)}}} is a {type(v).__name__}, not text")
            return json.dumps(v) if isinstance(v, bool) else str(v)
        return SUB_VAR.sub(one, x)

    def value(self, expr, where):
        call = re.fullmatch(r"\s*(env|config)\(\s*(['\"])([^'\"]+)\2\s*\)\s*", expr)
        if call:
            kind, key = call.group(1), call.group(3)
            given = self.env if kind == "env" else self.config
            if key not in given:
                raise RenderError(where, f"${{{expr}}} needs a value: pass --{kind} {key}=...")
            return given[key]
        ref = re.fullmatch(r"\s*vars\.([\w-]+)\s*", expr)
        if ref:
            return self.var(ref.group(1), where)
        raise RenderError(where, f"${{{expr}}} is not a Serverless Devs variable this renderer knows "
                                 "(env('X'), config('X'), vars.x); floe's route placeholders such as "
                                 "${table_name} cannot be written in s.yaml")


def render_fc(doc, var=(), env=(), config=()):
    fc = Fc(doc, var, env, config)
    all_vars = {name: fc.var(name, f"vars.{name}") for name in fc.raw_vars}
    rest = fc.interpolate({k: v for k, v in doc.items() if k != "vars"}, "")
    functions = {}
    for name, res in (rest.get("resources") or {}).items():
        if res.get("component") != "fc3":
            continue
        props = res.get("props") or {}
        code = str(props.get("code") or "").rstrip("/")
        if not code:
            raise RenderError(f"resources.{name}.props.code", "is missing")
        env_vars = props.get("environmentVariables") or {}
        for k, v in env_vars.items():
            if not isinstance(v, str):
                raise RenderError(f"resources.{name}.props.environmentVariables.{k}",
                                  f"is {type(v).__name__} {v!r}; Function Compute requires strings (quote it)")
        functions[name] = {"binary": "floe-" + code.rsplit("/", 1)[-1], "env": env_vars}
    scalars = {k: v for k, v in all_vars.items() if not isinstance(v, (dict, list))}
    return {"stack": "fc", "vars": scalars, "functions": functions}


def fc_axes(doc):
    """Vars empty by default that the functions' environment uses (not companions of another)."""
    raw_vars = doc.get("vars") or {}
    envs = [(r.get("props") or {}).get("environmentVariables") for r in (doc.get("resources") or {}).values()]
    used = {m for s in walk(envs) if isinstance(s, str) for m in re.findall(r"\$\{\s*vars\.([\w-]+)", s)}
    companions = {n for extra in COMPANIONS.values() for n in extra}
    return {n: ["", SAMPLES.get(n, f"example-{n}")] for n in raw_vars
            if n in used and raw_vars[n] == "" and n not in companions}


def combinations(stack, axes, pinned, declared, render):
    renders = []
    free = {k: v for k, v in axes.items() if k not in pinned}
    for values in itertools.product(*free.values()):
        chosen = dict(zip(free, values))
        settings = {**pinned, **chosen}
        for name, value in list(settings.items()):
            for extra in (COMPANIONS.get((name, value)), value and COMPANIONS.get((name, "*"))):
                for k, v in (extra or {}).items():
                    if k in declared:
                        settings.setdefault(k, v)
        shown = {k: v.split("\n")[0] + ("..." if "\n" in v.strip() else "") for k, v in chosen.items()}
        label = f"{stack}:" + ",".join(f"{k}={v}" for k, v in shown.items())
        try:
            renders.append({"name": label, **render(list(settings.items()))})
        except RenderError as e:
            raise RenderError(label, str(e)) from None
    return {"renders": renders}


# --- self-checks and the command line -----------------------------------------------------------

SAM_TEST = r"""
Parameters:
  Mode: {Type: String, Default: a, AllowedValues: [a, b]}
  Endpoint: {Type: String, Default: ""}
  Count: {Type: Number, Default: 5}
Conditions:
  IsB: !Equals [!Ref Mode, b]
  HasEndpoint: !Not [!Equals [!Ref Endpoint, ""]]
  Both: !And [!Condition IsB, {Condition: HasEndpoint}]
Rules:
  BNeedsEndpoint:
    RuleCondition: !Equals [!Ref Mode, b]
    Assertions: [{Assert: !Not [!Equals [!Ref Endpoint, ""]], AssertDescription: b needs an Endpoint}]
Globals:
  Function:
    Environment:
      Variables:
        SUB: !Sub "${AWS::Region}/${Mode}/${Bucket}/${Bucket.Arn}/${!Literal}/${Count}"
        LIST: !Sub ["${X}-${Y}", {X: !Ref Mode, Y: !GetAtt [Bucket, Arn]}]
        JOIN: !Join [",", [a, !If [IsB, b, !Ref AWS::NoValue], c]]
        GONE: !If [HasEndpoint, !Ref Endpoint, !Ref AWS::NoValue]
        LONG: {"Fn::Sub": "${AWS::StackName}"}
        SEL: !Select [1, !Split ["/", "x/y/z"]]
        OVERRIDE: global
Resources:
  Bucket: {Type: AWS::S3::Bucket}
  Optional: {Type: AWS::S3::Bucket, Condition: IsB}
  Fn:
    Type: AWS::Serverless::Function
    Metadata: {BuildProperties: {Binary: floe-x}}
    Properties:
      Environment:
        Variables: {OVERRIDE: own, OPT: !If [IsB, !Ref Optional, none]}
"""
FC_TEST = r"""
vars:
  region: ${env('REGION')}
  url: "https://${vars.region}.example/${config('AccountID')}"
  empty: ""
  env: &env {A: "${vars.url}", B: plain}
  conf: &conf {environmentVariables: *env}
resources:
  one: {component: fc3, props: {<<: *conf, code: ./dist/fc/one}}
  two: {component: fc3, props: {<<: *conf, code: ./dist/fc/two/, environmentVariables: {<<: *env, B: "${vars.empty}x"}}}
"""


def selftest():
    def fails(render, *needles):
        try:
            render()
        except RenderError as e:
            assert all(n in str(e) for n in needles), f"{e} lacks {needles}"
            return
        raise AssertionError(f"no error naming {needles}")

    doc = yaml.load(SAM_TEST, Loader=CfnLoader)
    known = {"resource_value": [("Bucket", "bkt")], "attr": [("Bucket.Arn", "arn:b")]}
    out = render_sam(doc, **known)
    assert out["functions"]["Fn"] == {"binary": "floe-x", "env": {
        "SUB": "us-east-1/a/bkt/arn:b/${Literal}/5", "LIST": "a-arn:b", "JOIN": "a,c", "LONG": "floe",
        "SEL": "y", "OVERRIDE": "own", "OPT": "none"}}, out
    assert out["conditions"] == {"IsB": False, "HasEndpoint": False, "Both": False}
    out = render_sam(doc, param=[("Mode", "b"), ("Endpoint", "e")], resource_value=[("Bucket", "bkt"), ("Optional", "o")],
                     attr=known["attr"], pseudo=[("AWS::Region", "eu-west-1")])
    env = out["functions"]["Fn"]["env"]
    assert (env["JOIN"], env["GONE"], env["OPT"], env["SUB"][:9]) == ("a,b,c", "e", "o", "eu-west-1"), env
    assert out["conditions"]["Both"] is True
    fails(lambda: render_sam(doc), "Globals.Function.Environment.Variables.SUB", "--resource-value Bucket")
    fails(lambda: render_sam(doc, param=[("Mode", "b")], **known), "Rules.BNeedsEndpoint.Assertions[0]", "b needs")
    fails(lambda: render_sam(doc, param=[("Mode", "b"), ("Endpoint", "e")], **known),
          "Resources.Fn.Properties.Environment.Variables.OPT.Fn::If[1].Ref", "--resource-value Optional")
    fails(lambda: render_sam(doc, param=[("Mode", "c")]), "Parameters.Mode", "AllowedValues")
    bad = copy.deepcopy(doc)
    bad["Resources"]["Fn"]["Properties"]["Environment"]["Variables"]["BAD"] = {"Ref": "Optional"}
    fails(lambda: render_sam(bad, resource_value=[("Bucket", "b"), ("Optional", "o")], attr=known["attr"]),
          "Variables.BAD.Ref", "Condition IsB is false")
    bad["Resources"]["Fn"]["Properties"]["Environment"]["Variables"]["BAD"] = {"Fn::GetAtt": ["Nope", "Arn"]}
    fails(lambda: render_sam(bad, **known), "Variables.BAD.Fn::GetAtt", "'Nope'")
    assert sam_axes(doc) == {"Mode": ["a", "b"], "Endpoint": ["", "example-Endpoint"]}
    combos = combinations("sam", sam_axes(doc), {"Mode": "a"}, doc["Parameters"], lambda s: render_sam(doc, s, **known))
    assert [r["name"] for r in combos["renders"]] == ["sam:Endpoint=", "sam:Endpoint=example-Endpoint"]

    doc = yaml.safe_load(FC_TEST)
    out = render_fc(doc, env=[("REGION", "cn-x")], config=[("AccountID", "42")])
    assert out["functions"] == {
        "one": {"binary": "floe-one", "env": {"A": "https://cn-x.example/42", "B": "plain"}},
        "two": {"binary": "floe-two", "env": {"A": "https://cn-x.example/42", "B": "x"}}}, out
    assert out["vars"] == {"region": "cn-x", "url": "https://cn-x.example/42", "empty": ""}
    assert fc_axes(doc) == {"empty": ["", "example-empty"]}
    fails(lambda: render_fc(doc, config=[("AccountID", "42")]), "vars.region", "--env REGION")
    doc["vars"]["env"]["C"] = "floe.${table_name}"
    fails(lambda: render_fc(doc, env=[("REGION", "r")], config=[("AccountID", "1")]), "vars.env.C", "${table_name}")
    doc["vars"]["env"]["C"] = 300
    fails(lambda: render_fc(doc, env=[("REGION", "r")], config=[("AccountID", "1")]),
          "resources.one.props.environmentVariables.C", "requires strings")
    doc["vars"]["region"] = "${vars.url}"
    fails(lambda: render_fc(doc, config=[("AccountID", "1")]), "vars.region", "refers to itself")
    print("selftest: ok")


def main(argv):
    def kv(text):
        if "=" not in text:
            raise argparse.ArgumentTypeError(f"{text!r} is not K=V")
        return tuple(text.split("=", 1))

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    sub.add_parser("selftest")
    for mode, flags in (("sam", ("param", "resource-value", "attr", "pseudo")), ("fc", ("var", "env", "config"))):
        for name in (mode, f"{mode}-combinations"):
            p = sub.add_parser(name)
            p.add_argument("template")
            for flag in flags:
                p.add_argument(f"--{flag}", type=kv, action="append", default=[], metavar="K=V")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # a usage error exits 1 too (argparse's own is 2)
        sys.exit(1 if e.code == 2 else e.code)
    if args.mode == "selftest":
        return selftest()
    try:
        with open(args.template, encoding="utf-8") as f:
            doc = yaml.load(f, Loader=CfnLoader if args.mode.startswith("sam") else yaml.SafeLoader)
        if not isinstance(doc, dict):
            raise RenderError("(document)", "is not a YAML mapping")
        if args.mode == "sam":
            out = render_sam(doc, args.param, args.resource_value, args.attr, args.pseudo)
        elif args.mode == "sam-combinations":
            out = combinations("sam", sam_axes(doc), dict(args.param), doc.get("Parameters") or {},
                               lambda s: render_sam(doc, s, args.resource_value, args.attr, args.pseudo))
        elif args.mode == "fc":
            out = render_fc(doc, args.var, args.env, args.config)
        else:
            out = combinations("fc", fc_axes(doc), dict(args.var), doc.get("vars") or {},
                               lambda s: render_fc(doc, s, args.env, args.config))
    except (RenderError, yaml.YAMLError, OSError) as e:
        sys.exit(f"render_templates: {args.template}: {e}")
    json.dump(out, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
