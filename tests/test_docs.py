"""The README and the documentation site (issue 41): the README's size and its absolute links, one
base URL for the docs, the generated references up to date, and the README's two opening commands."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from pytest_aaco import options as opts

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: Markdown links and images ``[text](target)`` / ``![alt](target)``, and autolinks ``<https://...>``
LINK = re.compile(r"\]\(([^)\s]+)[^)]*\)|<(https?://[^>\s]+)>")
#: at most this many README lines (issue 41): the rest lives on the docs site
README_LINES = 250


def links(text: str) -> list[str]:
    return [m.group(1) or m.group(2) for m in LINK.finditer(text)]


def relative(text: str) -> list[str]:
    """The link targets of *text* that are not absolute http(s) addresses (they break on PyPI)."""
    return [target for target in links(text) if not re.match(r"https?://", target)]


def test_the_readme_is_short():
    assert len(README.splitlines()) <= README_LINES, f"README.md has {len(README.splitlines())} lines"


def test_every_readme_link_is_absolute():
    assert links(README), "the README links to the docs site"
    assert relative(README) == []


def test_the_link_check_sees_a_relative_link():
    text = "see [the options](docs/options.md), [a section](#baselines), ![plot](img.png) and <https://x.y/>"
    assert relative(text) == ["docs/options.md", "#baselines", "img.png"]
    assert links(text)[-1] == "https://x.y/"


def test_one_base_url_for_the_docs_site():
    """pyproject's Documentation URL, mkdocs' site_url and the option table's DOCS_URL (in --help) agree,
    and every README link to the site is under it."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    site = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert project["urls"]["Documentation"] == site["site_url"] == opts.DOCS_URL
    assert opts.DOCS_URL.endswith("/")
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")}
    for target in links(README):
        assert target.startswith(opts.DOCS_URL), target
        page = target.removeprefix(opts.DOCS_URL).split("#")[0].strip("/")
        assert page == "" or page in pages, f"{target}: no docs/{page}.md"


def test_the_readme_opens_with_the_two_commands():
    opening = README.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line for line in opening.splitlines() if line and not line.startswith("#")]
    assert commands == [
        'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[cpu]" && pytest tests/perf'
        " --aaco-provider=cpu",
        'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[cpu,test]" && pytest -n 2 --dist loadgroup',
    ]
    # the README's test command is what CI runs
    assert "\npytest -n 2 --dist loadgroup -p no:cacheprovider\n" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert README.index("```bash") < README.index("pytest-aaco is a pytest plugin")


def test_the_generated_references_are_up_to_date():
    """docs/options.md and docs/cli.md are what docs/gen_reference.py makes of the option table and
    the aaco parser: a changed option or command fails here until they are regenerated."""
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "gen_reference.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_options_reference_lists_every_option_and_its_ini_twin():
    page = (ROOT / "docs" / "options.md").read_text(encoding="utf-8")
    for opt in opts.OPTIONS:
        assert f"`{opt.flag}" in page and f"`{opt.dest}`" in page, opt.flag


def test_every_page_is_in_the_nav():
    site = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

    def pages(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [p for entry in nav for p in pages(entry)]
        if isinstance(nav, dict):
            return [p for value in nav.values() for p in pages(value)]
        return []

    assert sorted(pages(site["nav"])) == sorted(p.name for p in (ROOT / "docs").glob("*.md"))
