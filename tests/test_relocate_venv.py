from pathlib import Path

from tests.relocate_venv import relocate


def _script(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)


def test_a_copied_environments_scripts_run_its_own_python(tmp_path):
    source, copy = tmp_path / ".venv", tmp_path / ".venv-lab"
    (copy / "bin").mkdir(parents=True)
    _script(copy / "bin" / "jupyter", f"#!{source}/bin/python\nimport sys\n")
    _script(copy / "bin" / "pip3", f"#!{source}/bin/python3\nimport pip\n")
    _script(copy / "bin" / "activate", "# not a script of this environment's python\n")
    _script(copy / "bin" / "other", "#!/usr/bin/python3\n")
    (copy / "bin" / "python").symlink_to("/usr/bin/python3")

    assert relocate(source, copy) == 2
    assert (copy / "bin" / "jupyter").read_text() == f"#!{copy}/bin/python\nimport sys\n"
    assert (copy / "bin" / "pip3").read_text() == f"#!{copy}/bin/python3\nimport pip\n"
    assert (copy / "bin" / "other").read_text() == "#!/usr/bin/python3\n"
    assert (copy / "bin" / "jupyter").stat().st_mode & 0o111
