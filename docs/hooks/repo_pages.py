"""MkDocs hook: documents that live outside docs/ become pages of the site.

COMPATIBILITY.md stays at the top of the repository (the compat suite writes it there) and the cloud
engine's design sits beside its code; docs pages link to them by their repository paths
(`../COMPATIBILITY.md`), which GitHub follows, and this hook serves them as site pages and rewrites those
links, so `mkdocs build --strict` checks them like any other link.
"""

from __future__ import annotations

import pathlib
import re

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = pathlib.Path(__file__).resolve().parents[2]

# repository path -> page name in the site
REPO_PAGES = {
    "COMPATIBILITY.md": "compatibility-matrix.md",
    "storage/cloud/DESIGN.md": "cloud-design.md",
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for repo_path, page in REPO_PAGES.items():
        source = ROOT / repo_path
        if not source.is_file():
            raise FileNotFoundError(f"docs/hooks/repo_pages.py: {repo_path} is gone; update REPO_PAGES")
        files.append(File.generated(config, page, abs_src_path=str(source)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    for repo_path, site_page in REPO_PAGES.items():
        markdown = re.sub(r"\]\(\.\./" + re.escape(repo_path) + r"(#[^)]*)?\)",
                          lambda m, p=site_page: f"]({p}{m.group(1) or ''})", markdown)
    return markdown
