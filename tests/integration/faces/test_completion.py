"""bash completion of clsctl (contrib/completion/clsctl.bash) in a real bash with bash-completion:
commands, options, interface names and digests asked of the daemon, files."""

import os
import subprocess

import pytest

from harness.base import CLSCTL, SOURCE_DIR


pytestmark = pytest.mark.once

SCRIPT = os.path.join(SOURCE_DIR, "contrib", "completion", "clsctl.bash")


def complete(line, cwd=None):
    """What bash offers at the end of line (the words of a clsctl command line)."""
    prog = """
source /usr/share/bash-completion/bash_completion
source %s
COMP_LINE=%s
COMP_POINT=${#COMP_LINE}
read -ra COMP_WORDS <<< "$COMP_LINE"
[[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
_clsctl clsctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%%s\\n' "${COMPREPLY[@]}"
""" % (SCRIPT, "'" + line.replace("'", "'\\''") + "'")
    p = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, cwd=cwd, timeout=30)
    assert p.returncode == 0, p.stderr
    return [w for w in p.stdout.splitlines() if w]


def test_commands_options_interfaces_digests_and_files(net, clsd, bpf, workdir):
    ctl = "%s --socket %s " % (CLSCTL, clsd.socket)
    assert complete(ctl + "a") == ["apply"]
    assert set(complete(ctl)) >= {"ls", "get", "apply", "diff", "policy", "fleet", "object"}
    assert complete(ctl + "--ho") == ["--host", "--hosts"]
    assert set(complete(ctl + "policy ")) == {"ls", "get", "apply", "diff", "rm"}
    # interface names come from the daemon (clsctl ls)
    assert net.if_a in complete(ctl + "get ")
    assert complete(ctl + "get " + net.if_a[:-1]) == [net.if_a]
    # digests of stored objects (clsctl object ls)
    digest = clsd.api.upload_ok(bpf.count)
    got = complete(ctl + "object show ")
    assert got and digest[7:].startswith(got[0][:12]), got
    # a document file for apply
    with open(os.path.join(workdir, "web.json"), "w") as f:
        f.write("{}")
    assert complete(ctl + "apply %s w" % net.if_a, cwd=workdir) == ["web.json"]
