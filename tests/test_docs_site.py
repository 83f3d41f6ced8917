"""The documentation site (mkdocs.yml): Sphinx roles rendered as cross-references, and equations typeset
offline by the vendored KaTeX. Skipped without the docs extra (``pip install -e '.[docs]'``); the browser
check also without Debian's ``chromium``. CI installs the docs extra after ``make test`` and runs this
file then (``.ci/run``)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROLES = re.compile(r":(?:func|meth|class|data|attr|mod|obj|exc|const):")


def _extension():
    pytest.importorskip("griffe", reason="the docs extra is not installed")
    spec = importlib.util.spec_from_file_location("sphinx_roles", ROOT / "docs" / "hooks" / "sphinx_roles.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_roles_become_optional_cross_references_resolved_in_scope(tmp_path):
    ext = _extension()  # skips without the docs extra (griffe)
    import griffe

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text("def interval():\n    '''An interval.'''\n")
    (pkg / "mod.py").write_text(
        "from pkg import helpers as hp\nfrom pkg.helpers import interval\n\n"
        "LIMIT = 3\n\n"
        "class Box:\n"
        "    '''See :meth:`open` and :data:`LIMIT`.'''\n"
        "    def open(self):\n"
        "        '''Uses :func:`interval`, :func:`~pkg.helpers.interval`, :mod:`hp` and :func:`hp.interval`;\n"
        "        :class:`Nowhere` stays as written.'''\n")
    loaded = griffe.load("pkg", search_paths=[tmp_path], extensions=griffe.load_extensions(ext.SphinxRoles))
    box = loaded["mod.Box"]
    ref = '<autoref identifier="{}" optional><code>{}</code></autoref>'
    assert box.docstring.value == (f"See {ref.format('pkg.mod.Box.open', 'open')} and "
                                   f"{ref.format('pkg.mod.LIMIT', 'LIMIT')}.")
    text = box.members["open"].docstring.value
    for ident, shown in [("pkg.helpers.interval", "interval"), ("pkg.helpers", "hp"),
                         ("pkg.helpers.interval", "hp.interval"), ("Nowhere", "Nowhere")]:
        assert ref.format(ident, shown) in text, (ident, text)
    assert text.count(ref.format("pkg.helpers.interval", "interval")) == 2  # the ~ form shows the last part
    assert not ROLES.search(text)


def test_sphinx_literal_block_markers_read_as_sphinx_reads_them():
    ext = _extension()
    text = ("Example (a notebook)::\n\n    pi = load_policy(run)\n\nA marker apart ::\n\n    more\n\n::\n\n    x\n\n"
            "Not a block::\nthe same paragraph\n")
    assert ext.literal_blocks(text) == ("Example (a notebook):\n\n    pi = load_policy(run)\n\nA marker apart\n\n"
                                        "    more\n\n\n\n    x\n\nNot a block::\nthe same paragraph\n")


@pytest.mark.slow
def test_built_site_renders_roles_and_equations_with_the_network_off(tmp_path):
    """Build the site as CI does, then load an algorithm page in headless Chromium with every host
    unresolvable: KaTeX must typeset each equation, from files in the site alone."""
    pytest.importorskip("mkdocs", reason="the docs extra is not installed")
    from bench.analysis.report import find_chromium

    site = tmp_path / "site"
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(site)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    pages = list(site.rglob("*.html"))
    literal = {str(f.relative_to(site)): len(ROLES.findall(f.read_text())) for f in pages}
    assert sum(literal.values()) == 0, {k: v for k, v in literal.items() if v}
    scoring = (site / "api" / "scoring" / "index.html").read_text()
    assert scoring.count('class="autorefs autorefs-internal"') >= 10  # roles that name documented objects link
    remote = [f for f in pages if re.search(r"""<script[^>]+src=["']https?:""", f.read_text())]
    assert not remote, remote
    fonts = [f for f in pages if "fonts.googleapis.com" in f.read_text()]  # the theme's font: false
    assert not fonts, fonts
    policies = (site / "api" / "policies" / "index.html").read_text()
    assert "Example (a notebook):" in policies and "notebook)::" not in policies  # a Sphinx literal-block marker

    exe = find_chromium()
    if exe is None:
        pytest.skip("no chromium on PATH for the offline rendering check (Debian: apt-get install chromium)")
    page = site / "algorithms" / "ppo" / "index.html"
    n_math = page.read_text().count('class="arithmatex"')
    assert n_math >= 5
    with tempfile.TemporaryDirectory() as profile:
        r = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                            "--disable-background-networking", "--disable-component-update", "--disable-sync",
                            f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND",
                            "--virtual-time-budget=10000", "--dump-dom", page.as_uri()],
                           capture_output=True, text=True, timeout=120)
    dom = r.stdout
    assert "</html>" in dom, r.stderr[-2000:]
    # KaTeX writes one .katex element (MathML beside HTML) per typeset expression; none may fail.
    assert dom.count('<span class="katex">') == n_math, (dom.count('<span class="katex">'), n_math)
    assert "katex-error" not in dom and "\\(" not in dom
