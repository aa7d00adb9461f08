#!/usr/bin/env bash
# tools/check-docs.sh BUILD_DIR — checks README.md and docs/*.md against the tree they describe
# (ctest "docs", label "docs"). It needs python3 and a C compiler, nothing else.
#
# 1. Links. Every markdown link [text](target) and reference definition [x]: target outside code
#    whose target is relative (no scheme such as https:) must name an existing file or folder,
#    resolved from the document's folder. A #anchor must be a heading of the target .md file (or
#    of the document itself for a bare #anchor), spelled as GitHub makes it: lower case, spaces as
#    '-', punctuation other than '-' and '_' dropped, a repeated heading suffixed -1, -2, ...
#
# 2. Flags. Every --flag a document attributes to a torc tool must appear in that tool's --help
#    (as --flag, not followed by a letter, digit or '-'). Tools: torc-train, torc-xcheck,
#    torc-bench (BUILD_DIR/bin/NAME --help), any other tools/torc-* script or BUILD_DIR/bin/torc-*
#    binary (NAME --help), and tools/run-demo.sh, whose arguments go to torc-train.
#    Where flags are looked for: the lines of fenced code blocks (comments after '#' dropped,
#    lines ending in '\' joined) and inline code spans; prose outside code is never read.
#    Each line or span is cut into commands at ' | ', ' || ', ' && ' and ' ; '. In a command:
#     - a word whose last path component is a tool's name (torc-train, ./build/bin/torc-xcheck,
#       tools/run-demo.sh) starts that tool's arguments: the --flags after it are its own, up to
#       the next tool word;
#     - --flags before any tool word belong to the section's tool if the command starts with a
#       --flag (a span such as `--lr 0.01` or `--dim --layers`), else to some other program
#       (`mpirun --oversubscribe ...`) and are not checked;
#     - a command whose first word is cmake, ctest, make, git, apt, apt-get, pip, pip3, python or
#       python3 is never a tool invocation (`cmake --build b --target torc-train` names a target);
#     - a torc-NAME that is no tool counts as one where it is the command's first word after
#       VAR=value assignments, so its flags fail (the document names a tool that does not exist).
#    The section's tool is the tool named in the nearest heading above (## torc-bench, ### Flags
#    of `torc-train`), or the one set by a comment line <!-- check-docs: tool=NAME --> (which
#    holds until the next heading; tool=none clears it).
#    Not checked: short flags (-h), flags of other programs, flags of scripts that are not torc
#    tools (tools/fuzz.sh, tests/fault/sweep.sh). Flags a tool's --help lists that no document
#    attributes to it are printed as a note, not a failure.
#
# 3. C. Every fenced block whose info string starts with c compiles with
#    ${CC:-cc} -std=c11 -fsyntax-only -Wall -Wextra -Werror (unused variables, functions and
#    parameters allowed) -I core/include, the headers `cmake --install` installs:
#     ```c           a whole translation unit, compiled alone;
#     ```c body      statements, compiled as the body of main() after #include of torc/torc.h,
#                    stdio.h, stdlib.h, string.h, math.h and stdint.h;
#     ```c continue  appended to the previous c or c continue block of the same document and
#                    compiled with it (a walk-through that builds one file block by block).
#    Any other word after c is an error, so a block is never skipped by accident.
#
# Output: one line per failure, "FILE:LINE: what", then a summary; exit status 1 on any failure,
# 2 on a usage error.
set -euo pipefail
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: tools/check-docs.sh BUILD_DIR   (a build with torc-train, torc-xcheck and torc-bench in BUILD_DIR/bin)" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
cd "$(dirname "$0")/.."
exec python3 - "$build" "$PWD" <<'PY'
import os, re, subprocess, sys, tempfile

build, root = sys.argv[1], sys.argv[2]
docs = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir("docs") if f.endswith(".md")) \
    if os.path.isdir("docs") else ["README.md"]
failures = []

def fail(path, line, msg):
    failures.append(f"{path}:{line}: {msg}")

# ---- reading a document: fenced blocks, prose lines, headings ----
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")

def parse(path):
    """Yields ('heading', line, level, text), ('prose', line, text), ('block', line, info, [lines])."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            fence, info, start, body = m.group(2), m.group(3).strip(), i + 1, []
            i += 1
            while i < len(lines) and not re.match(r"^\s*" + re.escape(fence[0]) + "{%d,}\s*$" % len(fence), lines[i]):
                body.append(lines[i])
                i += 1
            out.append(("block", start, info, body))
            i += 1
            continue
        h = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", lines[i])
        if h:
            out.append(("heading", i + 1, len(h.group(1)), h.group(2)))
        else:
            out.append(("prose", i + 1, lines[i]))
        i += 1
    return out

def code_spans(text):
    return [m.group(2) for m in re.finditer(r"(`+)(.+?)\1", text)]

def strip_code(text):
    return re.sub(r"(`+)(.+?)\1", "", text)

def slug(heading):
    s = strip_code_keep(heading).strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")

def strip_code_keep(text):  # a heading's code spans keep their text, links their label
    text = re.sub(r"(`+)(.+?)\1", r"\2", text)
    return re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)

anchor_cache = {}

def anchors(path):
    if path not in anchor_cache:
        seen, result = {}, set()
        for item in parse(path):
            if item[0] == "heading":
                s = slug(item[3])
                n = seen.get(s, 0)
                seen[s] = n + 1
                result.add(s if n == 0 else f"{s}-{n}")
        anchor_cache[path] = result
    return anchor_cache[path]

# ---- 1. links ----
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")

def check_links(path):
    n = 0
    for item in parse(path):
        if item[0] != "prose":
            continue
        _, line, text = item
        targets = [m.group(1) for m in LINK.finditer(strip_code(text))]
        d = REFDEF.match(text)
        if d:
            targets.append(d.group(1))
        for t in targets:
            if not t or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", t):
                continue  # https:, mailto:, ...
            n += 1
            file_part, _, anchor = t.partition("#")
            target = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(target):
                fail(path, line, f"link to '{t}': no such file '{target}'")
                continue
            if anchor and target.endswith(".md") and os.path.isfile(target) and anchor not in anchors(target):
                fail(path, line, f"link to '{t}': '{target}' has no heading whose anchor is '#{anchor}'")
    return n

# ---- 2. flags ----
def find_tools():
    tools = {}
    for name in ("torc-train", "torc-xcheck", "torc-bench"):
        tools[name] = [os.path.join(build, "bin", name)]
    for d in (os.path.join(build, "bin"), "tools"):
        if os.path.isdir(d):
            for f in os.listdir(d):
                p = os.path.join(d, f)
                if f.startswith("torc-") and "." not in f and os.path.isfile(p) and os.access(p, os.X_OK):
                    tools.setdefault(f, [p if d != "tools" else os.path.join(root, p)])
    return tools

TOOLS = find_tools()
ALIASES = {"run-demo.sh": "torc-train"}
NOT_TOOLS = {"cmake", "ctest", "make", "git", "apt-get", "apt", "pip", "pip3", "python3", "python"}
help_cache, own_cache = {}, {}

def help_flags(tool):
    if tool not in help_cache:
        cmd = TOOLS.get(tool)
        if not cmd or not os.path.exists(cmd[0]):
            help_cache[tool] = None
        else:
            try:
                r = subprocess.run(cmd + ["--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, timeout=60)
                out = r.stdout
            except (OSError, subprocess.TimeoutExpired) as e:
                out = ""
                print(f"check-docs: {tool} --help: {e}", file=sys.stderr)
            help_cache[tool] = set(re.findall(r"(?<![\w-])(--[A-Za-z0-9][\w-]*)", out)) or None
            # Flags a help line gives another tool ("(torc-train --optim NAME)") are not this
            # tool's own: they count for the check, not for the note on undocumented flags.
            own = set()
            for l in out.split("\n"):
                other = re.search(r"torc-[a-z][a-z0-9-]*", l)
                if not other or other.group(0) == tool:
                    own |= set(re.findall(r"(?<![\w-])(--[A-Za-z0-9][\w-]*)", l))
            own_cache[tool] = own
    return help_cache[tool]

def tool_of(word, first=False):
    """The tool a word invokes, or None. A torc-NAME that is not a tool counts where it is the
    command's first word (then its flags fail: the document names a tool that does not exist)."""
    base = os.path.basename(word)
    if base in ALIASES:
        return ALIASES[base]
    if base in TOOLS or (first and re.fullmatch(r"torc-[a-z][a-z0-9-]*", base)):
        return base
    return None

FLAG = re.compile(r"^(--[A-Za-z0-9][\w-]*)(=.*)?$")
attributed = {}

def check_command(path, line, text, section_tool):
    for seg in re.split(r"\s(?:\|\|?|&&|;)\s", " " + text + " "):
        words = [w.strip("[](){}\"',.:") for w in seg.split()]
        words = [w for w in words if w]
        if not words or os.path.basename(words[0]) in NOT_TOOLS:
            continue
        current = section_tool if FLAG.match(words[0]) else None
        first = next((k for k, w in enumerate(words) if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)), 0)
        for k, w in enumerate(words):
            t = tool_of(w, k == first)
            if t:
                current = t
                continue
            m = FLAG.match(w)
            if not m or not current:
                continue
            flag = m.group(1)
            known = help_flags(current)
            if known is None:
                fail(path, line, f"'{flag}' is given to {current}, which does not exist or prints no --help "
                                 f"(looked for {TOOLS.get(current, [current])[0]})")
                continue
            attributed.setdefault(current, set()).add(flag)
            if flag not in known:
                fail(path, line, f"'{flag}' is not in {current} --help")

def heading_tool(text):
    for w in re.split(r"[\s`'\"(),:]+", text):
        t = tool_of(w) if w else None
        if t:
            return t
    return None

def check_flags(path):
    stack = []  # (level, tool or None)
    marker = None
    for item in parse(path):
        if item[0] == "heading":
            _, line, level, text = item
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading_tool(text)))
            marker = None
            continue
        section = marker if marker is not None else next((t for _, t in reversed(stack) if t), None)
        if marker == "none":
            section = None
        if item[0] == "prose":
            _, line, text = item
            m = re.search(r"<!--\s*check-docs:\s*tool=([\w.-]+)\s*-->", text)
            if m:
                marker = m.group(1) if m.group(1) == "none" else (tool_of(m.group(1)) or m.group(1))
                if marker != "none" and marker not in TOOLS:
                    fail(path, line, f"check-docs marker names '{m.group(1)}', not a torc tool")
                continue
            for span in code_spans(text):
                check_command(path, line, span, section)
        else:
            _, start, info, body = item
            lang = info.split()[0].lower() if info else ""
            if lang not in ("", "sh", "bash", "shell", "console", "text"):
                continue
            joined, first = "", None
            for k, raw in enumerate(body):
                s = re.sub(r"(^|\s)#.*$", "", raw)
                if s.lstrip().startswith("$ "):
                    s = s.lstrip()[2:]
                if first is None:
                    first = start + 1 + k
                if s.rstrip().endswith("\\"):
                    joined += s.rstrip()[:-1] + " "
                    continue
                check_command(path, first, joined + s, section)
                joined, first = "", None

# ---- 3. C blocks ----
PRELUDE = ("#include <math.h>\n#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
           "#include <string.h>\n#include <torc/torc.h>\n")
CC = os.environ.get("CC", "cc")
CFLAGS = ["-std=c11", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-Wno-unused-variable",
          "-Wno-unused-function", "-Wno-unused-parameter", "-Wno-unused-but-set-variable",
          "-I", os.path.join(root, "core", "include")]

def compile_unit(path, line, source, what):
    with tempfile.NamedTemporaryFile("w", suffix=".c", delete=False) as f:
        f.write(source)
        name = f.name
    try:
        r = subprocess.run([CC] + CFLAGS + [name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    finally:
        os.unlink(name)
    if r.returncode != 0:
        msg = "\n    ".join(l.replace(name, f"<{what}>") for l in r.stdout.strip().split("\n")[:12])
        fail(path, line, f"{what} does not compile:\n    {msg}")

def check_c(path):
    units = []  # [line, source, what]
    for item in parse(path):
        if item[0] != "block":
            continue
        _, start, info, body = item
        words = info.split()
        if not words or words[0].lower() != "c":
            continue
        mode = words[1] if len(words) > 1 else ""
        text = "\n".join(body) + "\n"
        where = f'#line {start + 1} "{path}"\n'
        if mode == "":
            units.append([start, where + text, f"the c block at line {start}"])
        elif mode == "body":
            units.append([start, PRELUDE + "int main(void) {\n" + where + text + "return 0;\n}\n",
                          f"the c body block at line {start}"])
        elif mode == "continue":
            if not units or "body" in units[-1][2]:
                fail(path, start, "a 'c continue' block needs a 'c' or 'c continue' block before it")
                continue
            units[-1][1] += where + text
            units[-1][2] += f" (continued at line {start})"
        else:
            fail(path, start, f"code block '{info}': c blocks are 'c', 'c body' or 'c continue'")
    for line, source, what in units:
        compile_unit(path, line, source, what)
    return len(units)

n_links = n_c = 0
for doc in docs:
    n_links += check_links(doc)
    check_flags(doc)
    n_c += check_c(doc)

for tool in sorted(attributed):
    help_flags(tool)
    missing = sorted(own_cache.get(tool, set()) - attributed[tool] - {"--help"})
    if missing:
        print(f"note: {tool} --help lists flags no document attributes to it: {' '.join(missing)}")
n_flags = sum(len(v) for v in attributed.values())
for f in failures:
    print(f)
print(f"check-docs: {len(docs)} documents, {n_links} relative links, {n_flags} distinct tool flags, "
      f"{n_c} C units: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
PY
