#!/usr/bin/env python3
"""The IDE files agree with the build: .vscode/launch.json's programs are targets of an existing
preset's build folder, each preLaunchTask is a task of .vscode/tasks.json that builds that target
with that preset, settings.json and .clangd name a preset's compile commands, and this build folder
has a compile_commands.json that covers the framework's sources (CMAKE_EXPORT_COMPILE_COMMANDS).

    ide_files.py SOURCE_DIR BUILD_DIR
"""
import json
import re
import sys
from pathlib import Path


def jsonc(path):
    """A VS Code JSON file: JSON with // comment lines."""
    text = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("//"))
    return json.loads(text)


def main():
    source, build = Path(sys.argv[1]), Path(sys.argv[2])
    problems = []
    presets = {p["name"]: p for p in json.loads((source / "CMakePresets.json").read_text())["configurePresets"]}
    targets = set()
    for cmake in source.rglob("CMakeLists.txt"):
        if "node_modules" in cmake.parts or "examples" in cmake.parts:
            continue
        targets.update(re.findall(r"add_executable\((\w+)", cmake.read_text()))
    tasks = {t["label"]: t for t in jsonc(source / ".vscode/tasks.json")["tasks"]}
    launch = jsonc(source / ".vscode/launch.json")["configurations"]
    if not any("reference" in c["program"] for c in launch):
        problems.append("launch.json: no configuration runs the reference preset's build")
    for c in launch:
        m = re.fullmatch(r"\$\{workspaceFolder\}/build/([\w-]+)/(?:tests/)?([\w-]+)", c["program"])
        if not m:
            problems.append(f"{c['name']}: program {c['program']} is not build/PRESET/[tests/]TARGET")
            continue
        preset, target = m.groups()
        if preset not in presets:
            problems.append(f"{c['name']}: no configure preset '{preset}'")
        if target not in targets:
            problems.append(f"{c['name']}: no target '{target}' (add_executable) in the CMakeLists")
        task = tasks.get(c.get("preLaunchTask", ""))
        if task is None:
            problems.append(f"{c['name']}: preLaunchTask '{c.get('preLaunchTask')}' is not in tasks.json")
        elif f"--preset {preset}" not in task["command"] or f"--target {target}" not in task["command"]:
            problems.append(f"{c['name']}: task '{task['label']}' does not build {target} with preset {preset}")
    settings = jsonc(source / ".vscode/settings.json")
    clangd = (source / ".clangd").read_text()
    for where, text in (("settings.json", json.dumps(settings)), (".clangd", clangd)):
        named = re.findall(r"build/([\w-]+)", text)
        if not named or any(p not in presets for p in named):
            problems.append(f"{where}: names build folders {named}, not presets")
    db = build / "compile_commands.json"
    if not db.exists():
        problems.append(f"{db}: missing (CMAKE_EXPORT_COMPILE_COMMANDS)")
    else:
        files = {Path(e["file"]).resolve() for e in json.loads(db.read_text())}
        for f in ("autograd/tensor.cpp", "nn/attention.cpp", "data/tokenizer.cpp", "train/trainer.cpp"):
            if (source / f).resolve() not in files:
                problems.append(f"{db}: no entry for {f}")
    for p in problems:
        print("FAIL:", p)
    print(f"ide files: {len(launch)} launch configurations, {len(tasks)} tasks, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
