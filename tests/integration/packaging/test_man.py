"""The man pages: built from their scdoc sources, rendered by man(1), and every flag --help shows is in
the page, and every flag the page shows is one --help has."""

import os
import re
import subprocess

import pytest

from harness.base import BUILD_DIR, CLSCTL, CLSD, SOURCE_DIR


pytestmark = pytest.mark.once

FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])")


def flags(text):
    return set(FLAG.findall(text))


@pytest.mark.parametrize("prog,page", [(CLSD, "clsd.8"), (CLSCTL, "clsctl.8")])
def test_every_flag_of_help_is_in_the_man_page_and_the_reverse(prog, page):
    help_text = subprocess.run([prog, "--help"], capture_output=True, text=True, check=True).stdout
    with open(os.path.join(SOURCE_DIR, "man", page + ".scd")) as f:
        source = f.read()
    want = flags(help_text.split("\nOPTIONS\n", 1)[1].split("\nEXIT STATUS\n", 1)[0])
    got = flags(source.split("\n# OPTIONS\n", 1)[1].split("\n# ", 1)[0])
    assert want - got == set(), "in --help, not in %s: %s" % (page, sorted(want - got))
    assert got - want == set(), "in %s, not in --help: %s" % (page, sorted(got - want))


@pytest.mark.parametrize("page", ["clsd.8", "clsctl.8", "clsd-documents.5", "clsd-fleet.7", "clsd-api.7"])
def test_the_pages_are_built_and_man_renders_them(page):
    path = os.path.join(BUILD_DIR, "man", page)
    p = subprocess.run(["man", "--warnings", "-l", path], capture_output=True, text=True,
                       env=dict(os.environ, MANWIDTH="100"))
    text = re.sub(".\x08", "", p.stdout)  # the pager's overstrike (bold, underline)
    assert p.returncode == 0 and "NAME" in text and "SEE ALSO" in text and not p.stderr.strip(), p.stderr[:2000]
