"""The ``report`` module re-runs a book chapter on a user's inputs and writes it as one offline page.

This is an edge module: it reads notebooks and files, runs a kernel through
papermill and builds HTML with the book's own Jupyter Book configuration.

Steps, each of which can fail with a one-paragraph
:class:`~planner.errors.PlannerInputError`:

1. :func:`chapter_parameters` reads the chapter's ``parameters`` cell (names,
   types, defaults, help text).
2. :func:`resolve_parameters` converts ``NAME=VALUE`` text and YAML values to
   those types. Parameters whose name ends in ``_path`` are files or folders;
   a relative one given on the command line is taken from the current
   directory, one in a YAML file from that file's folder.
3. :func:`check_output_dir` refuses an output folder inside ``book/``, equal to
   or inside an input's folder, or one whose files would replace an input.
4. :func:`write_report` executes the chapter with papermill (progress bar on
   stderr), builds the executed notebook into HTML with the book's Sphinx
   settings (execution off), inlines every local script, stylesheet, font and
   image, and only then moves ``<chapter>.ipynb`` and ``<chapter>.html`` into
   the output folder. On any failure nothing is left behind.
"""

from __future__ import annotations

import ast
import base64
import logging
import math
import mimetypes
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from planner.errors import PlannerInputError

REPO_ROOT = Path(__file__).resolve().parents[2]
BOOK_DIR = REPO_ROOT / "book"
PATH_SUFFIX = "_path"
_TYPES = ("str", "int", "float", "bool")
_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


class ChapterFailed(PlannerInputError):
    """A chapter cell raised while running on the user's inputs."""


@dataclass(frozen=True)
class ChapterParameter:
    """One entry of a chapter's ``parameters`` cell.

    Attributes
    ----------
    name : str
        The variable name.
    type_name : str
        ``"str"``, ``"int"``, ``"float"`` or ``"bool"``.
    default : object
        The value in the notebook.
    help : str
        The comment beside it (meaning and unit).
    """

    name: str
    type_name: str
    default: object
    help: str = ""

    @property
    def is_path(self) -> bool:
        """True for a file or folder parameter (name ends in ``_path``)."""
        return self.type_name == "str" and self.name.endswith(PATH_SUFFIX)


@dataclass(frozen=True)
class Report:
    """What :func:`write_report` wrote."""

    notebook: Path
    page: Path
    parameters: dict


def chapters(book_dir: Path = BOOK_DIR) -> list[str]:
    """Names of the book's chapters (its notebooks, without ``.ipynb``)."""
    return sorted(p.stem for p in book_dir.glob("*.ipynb"))


def chapter_path(chapter: str, book_dir: Path = BOOK_DIR) -> Path:
    """The notebook of ``chapter`` (a name like ``littles_law``, or its path in the book)."""
    if not book_dir.is_dir():
        raise PlannerInputError(
            f"the book's notebooks are not at {book_dir}; planner report runs from a checkout "
            "of the project installed with pip install -e ."
        )
    name = Path(chapter).name.removesuffix(".ipynb")
    path = book_dir / f"{name}.ipynb"
    if not path.is_file():
        raise PlannerInputError(f"unknown chapter {chapter!r}; chapters: {', '.join(chapters(book_dir))}")
    return path


def chapter_parameters(notebook: Path) -> dict[str, ChapterParameter]:
    """Parameters of a chapter, in the order of its ``parameters`` cell.

    papermill's inspection gives names, types and help; an annotated line it
    cannot parse is read from the cell's syntax tree instead, so no parameter
    goes missing.
    """
    import nbformat
    import papermill

    found: dict[str, ChapterParameter] = {}
    papermill_logger = logging.getLogger("papermill.translators")
    level = papermill_logger.level
    papermill_logger.setLevel(logging.ERROR)  # its "Unable to parse line" is handled below
    try:
        inspected = papermill.inspect_notebook(str(notebook))
    finally:
        papermill_logger.setLevel(level)
    for name, entry in inspected.items():
        default = _literal(entry.get("default"))
        type_name = entry.get("inferred_type_name") or type(default).__name__
        found[name] = ChapterParameter(name, type_name, default, entry.get("help") or "")
    cell = next(
        (
            c
            for c in nbformat.read(notebook, as_version=4).cells
            if "parameters" in c.get("metadata", {}).get("tags", [])
        ),
        None,
    )
    if cell is None:
        raise PlannerInputError(f"{notebook.name}: no cell tagged 'parameters'")
    ordered: dict[str, ChapterParameter] = {}
    lines = cell.source.splitlines()
    for node in ast.parse(cell.source).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name, annotation = node.target.id, ast.unparse(node.annotation)
            value = node.value
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name, annotation, value = node.targets[0].id, None, node.value
        else:
            continue
        if name in found:
            ordered[name] = found[name]
            continue
        default = _literal(ast.unparse(value)) if value is not None else None
        help_text = lines[node.lineno - 1].partition("#")[2].strip()
        ordered[name] = ChapterParameter(name, annotation or type(default).__name__, default, help_text)
    return ordered | {n: p for n, p in found.items() if n not in ordered}


def resolve_parameters(
    parameters: Mapping[str, ChapterParameter],
    pairs: Iterable[str] = (),
    params_file: Path | None = None,
    cwd: Path | None = None,
) -> dict:
    """Typed values for the chapter from ``NAME=VALUE`` texts and a YAML file.

    Parameters
    ----------
    parameters : mapping
        The chapter's parameters, from :func:`chapter_parameters`.
    pairs : iterable of str
        ``NAME=VALUE`` texts; they override the file.
    params_file : Path, optional
        A YAML mapping of names to values.
    cwd : Path, optional
        Folder that relative ``*_path`` values on the command line are taken
        from; the current directory by default.

    Returns
    -------
    dict
        Only the parameters given, converted to the chapter's types; paths
        made absolute.
    """
    cwd = Path(cwd or os.getcwd())
    given: dict[str, tuple[object, Path, str]] = {}  # name -> (value, base folder, where)
    if params_file is not None:
        for name, value in _read_params_file(Path(params_file)).items():
            given[name] = (value, Path(params_file).resolve().parent, f"{params_file}: {name}")
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise PlannerInputError(f"--param {pair!r}: expected NAME=VALUE")
        given[name] = (text, cwd, f"--param {name}")
    values = {}
    for name, (value, base, where) in given.items():
        if name not in parameters:
            listing = ", ".join(f"{p.name} ({p.type_name})" for p in parameters.values())
            raise PlannerInputError(f"{where}: the chapter has no parameter {name!r}; its parameters: {listing}")
        parameter = parameters[name]
        converted = _convert(parameter, value, where)
        if parameter.is_path:
            converted = _resolve_path(converted, base, where)
        values[name] = converted
    return values


def input_paths(parameters: Mapping[str, ChapterParameter], values: Mapping, book_dir: Path = BOOK_DIR) -> list[Path]:
    """Absolute paths of every file or folder the chapter will read."""
    paths = []
    for parameter in parameters.values():
        if not parameter.is_path:
            continue
        value = values.get(parameter.name, parameter.default)
        if isinstance(value, str) and value:
            paths.append((book_dir / value).resolve() if not Path(value).is_absolute() else Path(value).resolve())
    return paths


def check_output_dir(out_dir: Path, chapter: str, inputs: Iterable[Path], book_dir: Path = BOOK_DIR) -> Path:
    """Return ``out_dir`` made absolute, or refuse it.

    Refused: a file; the book's folder or anything inside it; an input's own
    folder (where a file input sits, or a folder input itself) or anything
    inside a folder input; a folder in which an output would replace an input.
    """
    out = Path(out_dir).resolve()
    book = book_dir.resolve()
    if out.exists() and not out.is_dir():
        raise PlannerInputError(f"--out {out_dir}: exists and is not a folder")
    if out == book or book in out.parents:
        raise PlannerInputError(f"--out {out_dir}: inside the book's folder {book}; write reports elsewhere")
    outputs = {out / f"{chapter}.ipynb", out / f"{chapter}.html"}
    for path in inputs:
        folder = path if path.is_dir() else path.parent
        if path in outputs:
            raise PlannerInputError(f"--out {out_dir}: would overwrite the input {path}")
        if out == folder or (path.is_dir() and path in out.parents):
            raise PlannerInputError(f"--out {out_dir}: is the folder of the input {path}; write reports elsewhere")
    return out


def write_report(
    chapter: str, values: Mapping, out_dir: Path, *, progress: bool = True, book_dir: Path = BOOK_DIR, log=None
) -> Report:
    """Run ``chapter`` with ``values`` and write its notebook and one offline HTML page.

    Parameters
    ----------
    chapter : str
        Chapter name (see :func:`chapters`).
    values : mapping
        Typed parameter values, from :func:`resolve_parameters`.
    out_dir : Path
        Output folder, already checked by :func:`check_output_dir`.
    progress : bool
        Show papermill's progress bar on stderr.
    log : callable, optional
        Called with one line per step (e.g. ``print`` to stderr).

    Raises
    ------
    ChapterFailed
        A cell raised; the message is that cell's error, on one line.
    """
    log = log or (lambda _line: None)
    notebook = chapter_path(chapter, book_dir)
    name = notebook.stem
    out = Path(out_dir)
    created = _missing_parents(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)  # mkdtemp makes it private; the report is an ordinary folder
    try:
        with tempfile.TemporaryDirectory(prefix="planner-report-") as work:
            work_dir = Path(work)
            executed = work_dir / f"{name}.ipynb"
            log(f"running {notebook.name} with papermill")
            _execute(notebook, executed, dict(values), progress, book_dir)
            log("building the page with the book's Sphinx settings")
            html_path = _build_html(executed, name, work_dir / "project", book_dir)
            page = inline_page(html_path)
            if "{glue" in page:
                raise PlannerInputError(f"{name}: glue placeholders left in the page; a glued value is missing")
            shutil.copyfile(executed, staging / f"{name}.ipynb")
            (staging / f"{name}.html").write_text(page, encoding="utf-8")
        _move_into_place(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for folder in reversed(created):
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return Report(out / f"{name}.ipynb", out / f"{name}.html", dict(values))


# --------------------------------------------------------------------------- parameters


def _literal(text):
    if not isinstance(text, str):
        return text
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _read_params_file(path: Path) -> dict:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PlannerInputError(f"--params {path}: no such file") from None
    except yaml.YAMLError as error:
        raise PlannerInputError(f"--params {path}: not valid YAML: {_one_line(str(error))}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PlannerInputError(f"--params {path}: expected a mapping of NAME: VALUE")
    return {str(k): v for k, v in data.items()}


_EXAMPLES = {"dict": ('{"0": 20}', "{0: 20, kv: 0.9}", "0=20,kv=0.9"), "list": ("[20, 0.9]", "20,0.9")}


def _convert_collection(parameter: ChapterParameter, value, where: str):
    """A dict or list parameter from JSON, YAML flow syntax, or ``NAME=VALUE,...`` / ``A,B`` items."""
    import yaml

    kind = parameter.type_name
    expected = dict if kind == "dict" else list
    if isinstance(value, expected):
        return value
    text = value.strip() if isinstance(value, str) else None
    if text is not None:
        try:
            parsed = yaml.safe_load(text) if text else expected()
        except yaml.YAMLError:
            parsed = None
        if isinstance(parsed, expected):
            return parsed
        items = [item.strip() for item in text.split(",") if item.strip()]
        if kind == "dict" and items and all("=" in item and item.partition("=")[0].strip() for item in items):
            return {item.partition("=")[0].strip(): _scalar(item.partition("=")[2]) for item in items}
        if kind == "list" and items and not text.startswith(("{", "[")):
            return [_scalar(item) for item in items]
    forms = " or ".join(f"--param '{parameter.name}={example}'" for example in _EXAMPLES[kind])
    noun = "a mapping" if kind == "dict" else "a list"
    raise PlannerInputError(f"{where}: expected {noun}, e.g. {forms}; got {value!r}")


def _scalar(text: str):
    import yaml

    text = text.strip()
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return parsed if isinstance(parsed, str | int | float | bool) or parsed is None else text


def _convert(parameter: ChapterParameter, value, where: str):
    kind = parameter.type_name
    if kind in _EXAMPLES:
        return _convert_collection(parameter, value, where)
    if kind not in _TYPES:
        return value  # an untyped parameter takes the value as given
    text = value.strip() if isinstance(value, str) else None
    if kind == "str":
        if isinstance(value, str):
            return value
        raise PlannerInputError(f"{where}: expected text, got {value!r} (quote it in YAML)")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if text is not None and text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        raise PlannerInputError(f"{where}: expected true or false, got {value!r}")
    if kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if text is not None and re.fullmatch(r"[+-]?\d+", text):
            return int(text)
        raise PlannerInputError(f"{where}: expected a whole number, got {value!r}")
    # float
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    else:
        try:
            number = float(text) if text is not None else math.nan
        except ValueError:
            number = math.nan
    if not math.isfinite(number):
        raise PlannerInputError(f"{where}: expected a finite number, got {value!r}")
    return number


def _resolve_path(value: str, base: Path, where: str) -> str:
    if not value.strip():
        return ""  # chapters read an empty path as "none given"
    path = Path(value).expanduser()
    path = (base / path) if not path.is_absolute() else path
    if not path.exists():
        raise PlannerInputError(f"{where}: no such file or folder: {path}")
    return str(path.resolve())


# --------------------------------------------------------------------------- running


def _execute(notebook: Path, executed: Path, values: dict, progress: bool, book_dir: Path) -> None:
    import papermill
    from papermill.exceptions import PapermillExecutionError

    try:
        with _kernel_stderr_filtered():
            papermill.execute_notebook(
                str(notebook),
                str(executed),
                parameters=values,
                cwd=str(book_dir),
                kernel_name="python3",
                progress_bar=progress,
                log_output=False,
                # Written once, when it has run (or failed): not again at every cell's start and end.
                request_save_on_cell_execute=False,
            )
    except PapermillExecutionError as error:
        raise ChapterFailed(
            f"{notebook.stem}: cell {error.exec_count} raised {error.ename}: {_one_line(error.evalue)}"
        ) from None


# ipykernel's own log lines: a warning on every start, and a KeyboardInterrupt notice when papermill
# stops a kernel whose cell failed. Neither says anything about the user's inputs.
_KERNEL_NOISE = ("running over TCP without encryption", "KeyboardInterrupt caught in kernel")
# A kernel stopped while it flushes its output logs this, with a traceback, on a loaded machine.
_KERNEL_SHUTDOWN_RACE = "Uncaught exception in ZMQStream callback"


def without_kernel_noise(lines: list[str]) -> list[str]:
    """The kernel's stderr lines without ipykernel's own noise (see ``_KERNEL_NOISE``).

    A ``ZMQStream callback`` error is dropped with the traceback under it
    (indented lines, up to and including its last, unindented line).
    """
    kept: list[str] = []
    in_race = in_traceback = False
    for line in lines:
        if _KERNEL_SHUTDOWN_RACE in line:
            in_race, in_traceback = True, False
            continue
        if in_race:
            if line.startswith("Traceback"):
                in_traceback = True
                continue
            if in_traceback and line.startswith((" ", "\t")):
                continue
            in_race = False
            if in_traceback:
                continue  # the exception's own line ends the traceback
        if not any(noise in line for noise in _KERNEL_NOISE):
            kept.append(line)
    return kept


@contextmanager
def _kernel_stderr_filtered():
    """Collect what the kernel process writes to stderr and replay it without the noise.

    The kernel inherits file descriptor 2, so it is pointed at a temporary
    file while the chapter runs; Python's own ``sys.stderr`` (the progress
    bar) keeps writing to the terminal through a duplicate.
    """
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    original = sys.stderr
    try:
        own_fd2 = original.fileno() == 2
    except (AttributeError, OSError, ValueError):
        own_fd2 = False
    with tempfile.TemporaryFile() as captured:
        if own_fd2:
            sys.stderr = os.fdopen(os.dup(saved), "w", buffering=1)
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if own_fd2:
                sys.stderr.close()
                sys.stderr = original
            captured.seek(0)
            for line in without_kernel_noise(captured.read().decode("utf-8", "replace").splitlines()):
                print(line, file=sys.stderr)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _one_line(text: str) -> str:
    return " ".join(_ANSI.sub("", str(text)).split())


def _build_html(executed: Path, name: str, project: Path, book_dir: Path) -> Path:
    """Build ``executed`` alone with the book's configuration; return its HTML page."""
    import yaml

    project.mkdir()
    _add_inputs_note(executed, name, project / f"{name}.ipynb")
    config = yaml.safe_load((book_dir.parent / "_config.yml").read_text(encoding="utf-8"))
    config["execute"] = {**config.get("execute", {}), "execute_notebooks": "off"}
    config["only_build_toc_files"] = True
    config["exclude_patterns"] = ["_build"]
    sphinx = config.setdefault("sphinx", {})
    sphinx["local_extensions"] = {
        ext: str((book_dir.parent / folder).resolve()) for ext, folder in (sphinx.get("local_extensions") or {}).items()
    }
    sphinx_config = sphinx.setdefault("config", {})
    sphinx_config["html_static_path"] = [
        str((book_dir.parent / p).resolve()) for p in sphinx_config.get("html_static_path", [])
    ]
    (project / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    (project / "_toc.yml").write_text(f"format: jb-book\nroot: {name}\n", encoding="utf-8")
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from jupyter_book.cli.main import main; sys.exit(main())",
            "build",
            str(project),
            "--keep-going",
        ],
        capture_output=True,
        text=True,
        cwd=project,
    )
    page = project / "_build" / "html" / f"{name}.html"
    if result.returncode != 0 or not page.is_file():
        tail = _one_line((result.stderr or result.stdout)[-800:])
        raise PlannerInputError(f"{name}: building the page failed: {tail}")
    return page


def _add_inputs_note(executed: Path, name: str, target: Path) -> None:
    """Copy the executed notebook to ``target`` with a note of its inputs under the title.

    A shared report must say what it was run on; the executed notebook in the
    output folder stays exactly as papermill wrote it.
    """
    import nbformat

    notebook = nbformat.read(executed, as_version=4)
    values = notebook.metadata.get("papermill", {}).get("parameters", {})
    if values:
        shown = ", ".join(f"`{k} = {str(v).replace('`', chr(39))!s}`" for k, v in values.items())
        text = (
            f"> **Report.** Made with `planner report {name}` on these inputs: {shown}. "
            "Every other parameter has the chapter's default value."
        )
    else:
        text = f"> **Report.** Made with `planner report {name}` on the chapter's default inputs."
    note = nbformat.v4.new_markdown_cell(text)
    note["id"] = "planner-report-inputs"
    notebook.cells.insert(1 if notebook.cells and notebook.cells[0].cell_type == "markdown" else 0, note)
    nbformat.write(notebook, target)


# --------------------------------------------------------------------------- inlining

_CSS_URL = re.compile(r"url\(\s*(['\"]?)([^'\")]+)\1\s*\)")
_CSS_IMPORT = re.compile(r"@import\s+(?:url\(\s*(['\"]?)([^'\")]+)\1\s*\)|['\"]([^'\"]+)['\"])[^;]*;")
# embed-amd.js builds its Font Awesome URLs from its own location, which a
# single file does not have; the woff2 files (the format browsers pick) go inline.
_WIDGET_FONT = re.compile(r"\b\w\.p\+\"([0-9a-f]{20}\.woff2)\"")


def inline_page(html_path: Path) -> str:
    """Return the page at ``html_path`` with every local resource it loads inlined.

    Scripts become ``data:`` URLs (so ``defer`` and order still hold),
    stylesheets become ``<style>`` elements with their fonts and images as
    ``data:`` URLs, images become ``data:`` URLs, and preload hints go. Links
    to other pages are left as they are; nothing is fetched when it opens.
    """
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html_path.read_text(encoding="utf-8"), "html.parser")
    base = html_path.parent
    for script in soup.find_all("script", src=True):
        path = _local(script["src"], base)
        if path is None:
            continue
        body = path.read_bytes()
        if path.name == "embed-amd.js":
            body = _inline_widget_fonts(body, path.parent)
        script["src"] = _data_url(body, "text/javascript")
    for link in soup.find_all("link", href=True):
        rel = {r.lower() for r in (link.get("rel") or [])}
        path = _local(link["href"], base)
        if path is None:
            continue
        if "stylesheet" in rel:
            style = soup.new_tag("style")
            style.string = _inline_css(path)
            link.replace_with(style)
        elif rel & {"preload", "prefetch", "modulepreload"}:
            link.decompose()
        elif rel & {"icon", "shortcut"}:
            link["href"] = _data_url(path.read_bytes(), _mime(path))
    for tag in soup.find_all(["img", "source"], src=True):
        path = _local(tag["src"], base)
        if path is not None:
            tag["src"] = _data_url(path.read_bytes(), _mime(path))
    return str(soup)


def _local(url: str | list[str], base: Path) -> Path | None:
    """The file a relative URL names, or None for remote, data: or missing targets."""
    if not isinstance(url, str):  # a multi-valued attribute (class, rel), never src or href
        return None
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or not parts.path:
        return None
    path = (base / unquote(parts.path)).resolve()
    return path if path.is_file() else None


def _inline_css(path: Path, depth: int = 0) -> str:
    text = path.read_text(encoding="utf-8", errors="replace")

    def imported(match: re.Match) -> str:
        target = _local(match.group(2) or match.group(3), path.parent)
        if target is None or depth > 5:
            return match.group(0)
        return _inline_css(target, depth + 1)

    # An @import must come before other rules, so the imported text replaces it in place.
    text = _CSS_IMPORT.sub(imported, text)

    def replace(match: re.Match) -> str:
        target = _local(match.group(2), path.parent)
        if target is None:
            return match.group(0)
        return f'url("{_data_url(target.read_bytes(), _mime(target))}")'

    return _CSS_URL.sub(replace, text)


def _inline_widget_fonts(body: bytes, folder: Path) -> bytes:
    text = body.decode("utf-8")

    def replace(match: re.Match) -> str:
        font = folder / match.group(1)
        if not font.is_file():
            return match.group(0)
        return '"' + _data_url(font.read_bytes(), "font/woff2") + '"'

    return _WIDGET_FONT.sub(replace, text).encode("utf-8")


def _mime(path: Path) -> str:
    known = {
        ".woff2": "font/woff2",
        ".woff": "font/woff",
        ".ttf": "font/ttf",
        ".svg": "image/svg+xml",
        ".js": "text/javascript",
        ".css": "text/css",
    }
    return known.get(path.suffix.lower()) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"


def _data_url(body: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(body).decode('ascii')}"


# --------------------------------------------------------------------------- writing


def _missing_parents(out: Path) -> list[Path]:
    """Folders above ``out`` that do not exist yet (outermost first)."""
    missing = []
    for folder in [out.parent, *out.parent.parents]:
        if folder.exists():
            break
        missing.append(folder)
    return list(reversed(missing))


def _move_into_place(staging: Path, out: Path) -> None:
    """Rename the finished folder to ``out``, or, if it exists, rename each file into it."""
    if not out.exists():
        os.replace(staging, out)
        return
    for item in staging.iterdir():
        os.replace(item, out / item.name)
    staging.rmdir()
