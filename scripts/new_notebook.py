"""Write a clean (output-free) notebook from cell sources: `new_notebook(path, cells)`.

Cells are strings; the first is tagged `parameters` for papermill. Used once per
notebook when it is created; edit the .ipynb in JupyterLab afterwards.
"""
from __future__ import annotations

import sys

import nbformat


def new_notebook(path: str, title: str, cells: list[str]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells.append(nbformat.v4.new_markdown_cell(title))
    for i, src in enumerate(cells):
        cell = nbformat.v4.new_code_cell(src.strip("\n"))
        if i == 0:
            cell.metadata["tags"] = ["parameters"]
        nb.cells.append(cell)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i}"
    nbformat.write(nb, path)


if __name__ == "__main__":
    sys.exit("import new_notebook from this module")
