"""The man pages and the code name the same things, both ways: a flag, a clsctl command, a route or an
error code added without its page fails here, and so does a page that names one the code no longer has.

- clsctl's commands: its verb table (src/ctl/clsctl.c, what it dispatches), `clsctl --help`'s
  COMMANDS and clsctl(8)'s COMMANDS;
- routes: openapi/clsd.yaml (test_openapi.py checks the daemon serves each as it says) and clsd-api(7)'s
  ROUTES, methods included;
- error codes: src/basic/error-code.h (the one list, with each code's HTTP status) and clsd-api(7)'s
  ERROR CODES, statuses included;
- flags: any --flag a page's prose names (outside its examples) is one of clsd's or clsctl's, or
  another tool's that the page names beside it (test_man.py checks clsd(8)'s and clsctl(8)'s OPTIONS
  against --help both ways)."""

import glob
import os
import re
import subprocess

import yaml

from harness.base import CLSCTL, CLSD, SOURCE_DIR


MAN = os.path.join(SOURCE_DIR, "man")


def page(name):
    with open(os.path.join(MAN, name + ".scd")) as f:
        return f.read()


def section(text, title):
    """The text of one top-level section ("# TITLE") of a page."""
    return text.split("\n# %s\n" % title, 1)[1].split("\n# ", 1)[0]


def unescape(s):
    return s.replace("\\_", "_").replace("\\*", "*")


def prose(text):
    """A page without its literal blocks."""
    return re.sub(r"^```\n.*?^```\n", "", text, flags=re.S | re.M)


def verbs_of_code():
    """Every command clsctl dispatches, from its verb tables' usage lines ("clsctl fleet rollout
    status|pause NAME" is two)."""
    with open(os.path.join(SOURCE_DIR, "src", "ctl", "clsctl.c")) as f:
        usages = re.findall(r'\{ "[a-z]+", "clsctl ([^"]+)"', f.read())
    out = set()
    for u in usages:
        words = []
        for w in u.split():
            if not re.fullmatch(r"[a-z|]+", w):
                break
            words.append(w)
        *head, last = words
        out |= {" ".join(head + [alt]) for alt in last.split("|")}
    return out


def verbs_of_help():
    text = subprocess.run([CLSCTL, "--help"], capture_output=True, text=True, check=True).stdout
    block = text.split("\nCOMMANDS\n", 1)[1].split("\nOPTIONS\n", 1)[0]
    out = set()
    for line in block.splitlines():
        m = re.match(r"^ {7}([a-z][a-z |]*[a-z])(?: [A-Z\[]| oci://|  |$)", line)
        if not m or line.startswith("       FILE may"):
            continue
        *head, last = m.group(1).split()
        out |= {" ".join(head + [alt]) for alt in last.split("|")}
    return out - {"help"}


def verbs_of_page():
    """clsctl(8)'s COMMANDS items: "*fleet rollout pause*|*resume* _NAME_", "*map set* ..., *map rm* ..."."""
    out = set()
    for line in section(page("clsctl.8"), "COMMANDS").splitlines():
        if not line.startswith("*"):
            continue
        for item in line.split(", "):
            m = re.match(r"\*([a-z ]+)\*((?:\|\*[a-z]+\*)*)", item)
            if not m:
                continue
            *head, last = m.group(1).split()
            alts = [last] + re.findall(r"\|\*([a-z]+)\*", m.group(2))
            out |= {" ".join(head + [a]) for a in alts}
    return out - {"help"}  # (clsctl's own, beside --help: not a verb of the tables)


def test_every_clsctl_command_is_in_help_and_in_the_page_and_no_other():
    code, helped, documented = verbs_of_code(), verbs_of_help(), verbs_of_page()
    assert len(code) > 30, sorted(code)
    assert code - helped == set(), "dispatched, not in clsctl --help: %s" % sorted(code - helped)
    assert helped - code == set(), "in clsctl --help, not dispatched: %s" % sorted(helped - code)
    assert code - documented == set(), "dispatched, not in clsctl(8): %s" % sorted(code - documented)
    assert documented - code == set(), "in clsctl(8), not dispatched: %s" % sorted(documented - code)


def test_every_route_of_the_contract_is_in_clsd_api_7_and_no_other():
    with open(os.path.join(SOURCE_DIR, "openapi", "clsd.yaml")) as f:
        spec = yaml.safe_load(f)
    want = {(m.upper(), p) for p, ops in spec["paths"].items() for m in ops
            if m in ("get", "put", "post", "delete")}
    got = set()
    for methods, path in re.findall(r"^\*([A-Z|]+)\* (/\S*)$", section(page("clsd-api.7"), "ROUTES"), re.M):
        got |= {(m, unescape(path)) for m in methods.split("|")}
    assert len(want) > 30
    assert want - got == set(), "in openapi/clsd.yaml, not in clsd-api(7): %s" % sorted(want - got)
    assert got - want == set(), "in clsd-api(7), not in openapi/clsd.yaml: %s" % sorted(got - want)


def test_every_error_code_is_in_clsd_api_7_with_its_status_and_no_other():
    with open(os.path.join(SOURCE_DIR, "src", "basic", "error-code.h")) as f:
        want = {(c, int(s)) for c, s in re.findall(r'X\([A-Z_0-9]+, *"([a-z_0-9]+)", *(\d+)\)', f.read())}
    got = {(unescape(c), int(s)) for c, s in
           re.findall(r"^\*([a-z\\_0-9]+)\* \((\d+)\)$", section(page("clsd-api.7"), "ERROR CODES"), re.M)}
    assert len(want) > 70
    assert want - got == set(), "in error-code.h, not in clsd-api(7) (or another status): %s" % sorted(want - got)
    assert got - want == set(), "in clsd-api(7), not in error-code.h: %s" % sorted(got - want)


# Other tools' flags the pages name in prose, each beside its tool.
FOREIGN = {"--data": "curl", "--unix-socket": "curl", "--check": "ansible-playbook", "--diff": "ansible-playbook",
           "--now": "systemctl", "--wipe": "meson",
           "--auth-token": "etcd", "--bcrypt-cost": "etcd", "--client-cert-auth": "etcd"}


def flags_of(prog):
    text = subprocess.run([prog, "--help"], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))


def test_every_flag_a_page_names_is_one_the_code_has():
    known = flags_of(CLSD) | flags_of(CLSCTL)
    problems = []
    for path in sorted(glob.glob(os.path.join(MAN, "*.scd"))):
        text = prose(open(path).read())
        for flag in sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", unescape(text)))):
            if flag in known:
                continue
            tool = FOREIGN.get(flag)
            if tool and tool in text:
                continue
            problems.append("%s: %s is neither clsd's nor clsctl's" % (os.path.basename(path), flag))
    assert not problems, "\n".join(problems)


def test_the_readme_is_a_front_door_and_its_links_resolve():
    """At most 250 lines, the two commands in its first 60, and every relative link to a file that is
    there (a man page's source, docs/, openapi/)."""
    with open(os.path.join(SOURCE_DIR, "README.md")) as f:
        text = f.read()
    lines = text.splitlines()
    assert len(lines) <= 250, len(lines)
    head = "\n".join(lines[:60])
    assert "scripts/demo" in head and "scripts/test" in head
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    relative = [l for l in links if not re.match(r"[a-z]+:", l)]
    assert len(relative) >= 8, relative
    missing = [l for l in relative if not os.path.exists(os.path.join(SOURCE_DIR, l))]
    assert not missing, missing
    # each man page it sends readers to is one meson builds
    with open(os.path.join(MAN, "meson.build")) as f:
        built = f.read()
    for sect, name in re.findall(r"`man (\d) ([a-z-]+)`", text):
        assert "['%s', '%s']" % (name, sect) in built, (name, sect)
