#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""mkman.py - a program's man page, made at build time from its own --help.

    mkman.py --name NAME --section N [--see-also PAGE]... [--omit HEADING]...
             -o OUT -- PROG [ARG]...

Runs PROG --version (the page's footer) and PROG --help, and, for every
command its COMMANDS section (or argparse's "positional arguments") lists,
PROG COMMAND --help; it turns their text into roff.  The programs' help
already follows a man page's layout (NAME, SYNOPSIS, DESCRIPTION, OPTIONS,
... headings at column 0, the text indented), so the page cannot say
anything that --help does not: they cannot drift.  Option lines
("-a, --chain CHAIN  text") become tagged paragraphs, prose is filled, and
everything else (synopses, examples, tables) is kept as it is laid out.
"""
import argparse
import os
import re
import subprocess
import sys

VERBATIM = {"SYNOPSIS", "COMMANDS", "EXAMPLES", "ENVIRONMENT", "FILES", "SIGNALS", "EXIT STATUS"}
ARGPARSE_HEADINGS = {"positional arguments": "COMMANDS", "options": "OPTIONS"}


def run(argv):
    env = dict(os.environ, COLUMNS="80", LC_ALL="C")
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, check=False)
    if p.returncode != 0:
        sys.exit("mkman.py: '%s' exited with %d: %s" % (" ".join(argv), p.returncode,
                                                         p.stderr.decode(errors="replace").strip()))
    return p.stdout.decode("utf-8")


def esc(text, dashes=False):
    """roff-escape one line of text; dashes: every '-' a minus (option names)."""
    text = text.replace("\\", "\\e")
    if dashes:
        text = text.replace("-", "\\-")
    else:
        text = re.sub(r"(?<![\w.-])(--?)(?=[\w\[])", lambda m: "\\-" * len(m.group(1)), text)
    # A long path (an install prefix) cannot be filled: let it break after
    # each '/' ("\\:", a zero-width break point).
    text = re.sub(r"\S{25,}", lambda m: m.group(0).replace("/", "/\\:"), text)
    if text[:1] in (".", "'"):
        text = "\\&" + text
    return text


def indent_of(line):
    return len(line) - len(line.lstrip(" "))


def sections(text):
    """[(heading, [lines])]; heading None for lines before the first one."""
    out, usage = [(None, [])], False
    for line in text.rstrip("\n").split("\n"):
        line, prev = line.rstrip(), prev_line(out)
        m = re.match(r"(?i)usage: (.*)", line)
        if m:
            out.append(("SYNOPSIS", ["    " + m.group(1)]))
            usage = True
        elif usage and not line:  # a "Usage:" synopsis ends at a blank line
            out.append((None, []))
            usage = False
        elif is_heading(line, prev):
            head = line.rstrip(":")
            out.append((ARGPARSE_HEADINGS.get(head, head), []))
        else:
            out[-1][1].append(line)
    return [(h, body) for h, body in out if h is not None or any(body)]


def prev_line(secs):
    """The last line read: "" after a heading or a blank line."""
    return secs[-1][1][-1] if secs[-1][1] else ""


def is_heading(line, prev):
    """"NAME", "EXIT STATUS" (man style), or "Options:" (at most 4 words)
    after a blank line."""
    if not line or line[0] == " ":
        return False
    if re.fullmatch(r"[A-Z][A-Z ]*[A-Z]( \(.*\))?", line):
        return True
    return not prev and line.endswith(":") and len(line.split()) <= 4 and ". " not in line


def text_column(lines):
    """The column where option texts start in most option lines, or 0."""
    cols = {}
    for line in lines:
        m = re.match(r"(\s+-\S.*?\s{2,})\S", line)
        if m:
            cols[len(m.group(1))] = cols.get(len(m.group(1)), 0) + 1
    return max(cols, key=cols.get) if cols else 0


def option_items(lines):
    """Split lines into ("opt", term, text) and ("text", [lines]) runs."""
    runs, i, col = [], 0, text_column(lines)
    while i < len(lines):
        line = lines[i]
        ind = indent_of(line)
        if line.strip().startswith("-") and ind > 0:
            m = re.match(r"\s*(\S.*?)(?:\s{2,}(\S.*))?$", line)
            term, text = m.group(1), [m.group(2)] if m.group(2) else []
            if not text and col and len(line) > col and line[col - 1] == " " and line[col] != " ":
                term, text = line[:col].strip(), [line[col:]]  # no gap: the term fills its column
            i += 1
            while i < len(lines) and lines[i].strip() and indent_of(lines[i]) > ind:
                text.append(lines[i].strip())
                i += 1
            runs.append(("opt", term, text))
            continue
        if runs and runs[-1][0] == "text":
            runs[-1][1].append(line)
        else:
            runs.append(("text", [line]))
        i += 1
    return runs


def join(lines):
    """Wrapped lines as one; a word cut after its hyphen is whole again."""
    text = ""
    for line in lines:
        glue = "" if re.search(r"\w-$", text) else " "
        text = text + glue + line if text else line
    return text


def text_block(lines, verbatim):
    """Paragraphs of lines: filled when they are plain prose, else kept."""
    out, para = [], []
    for line in lines + [""]:
        if line.strip():
            para.append(line)
            continue
        if not para:
            continue
        indents = {indent_of(x) for x in para}
        base = min(indents)
        if verbatim or len(indents) > 1:
            out += [".PP", ".nf"] + [esc(x[base:]) for x in para] + [".fi"]
        else:
            out += [".PP"] + [esc(x.strip()) for x in para]
        para = []
    return out


def body(heading, lines):
    verbatim = heading in VERBATIM
    if verbatim:  # "--opt" lines here are examples' continuations
        return text_block(lines, True)
    out = []
    for run_ in option_items(lines):
        if run_[0] == "opt":
            out += [".TP", ".B " + esc(run_[1], dashes=True), esc(join(run_[2]))]
        else:
            out += text_block(run_[1], verbatim)
    return out


def commands(lines):
    names = []
    for line in lines:
        m = re.match(r" {1,4}([a-z][a-z0-9-]*(?: [a-z][a-z0-9-]*)*)(?=\s|$)", line)
        if m and m.group(1) != "help" and m.group(1) not in names:
            names.append(m.group(1))
    return names


def command_page(prog, name, omit):
    out = [".SS " + esc(name)]
    for heading, lines in sections(run(prog + name.split() + ["--help"])):
        if heading in omit:
            continue
        if heading == "SYNOPSIS":
            out += [".nf"] + [esc(x.strip()) for x in lines if x.strip()] + [".fi"]
            continue
        if heading:
            out += [".PP", ".B " + esc(heading)]
        out += body(heading, lines)
    return out


def page(args):
    prog = args.prog
    version = run(prog + ["--version"]).strip()
    secs = sections(run(prog + ["--help"]))
    out = ['.TH %s %s "" "%s" "tapstripe"' % (args.name.upper(), args.section, esc(version))]
    names = [s for s in secs if s[0] == "NAME"]
    if not names:  # argparse: "PROG - what it is" is a line of the description
        for heading, lines in secs:
            found = [x for x in lines if x.startswith(args.name + " - ")]
            if found:
                lines.remove(found[0])
                secs.insert(0, ("NAME", ["    " + found[0]]))
                break
        secs = [("DESCRIPTION" if h is None else h, b) for h, b in secs]
        secs.sort(key=lambda s: ["NAME", "SYNOPSIS"].index(s[0]) if s[0] in ("NAME", "SYNOPSIS") else 2)
    for heading, lines in secs:
        out.append((".SH " if heading.isupper() else ".SS ") + esc(heading))
        if heading == "NAME":
            out.append(esc(" ".join(x.strip() for x in lines if x.strip())).replace(" - ", " \\- ", 1))
            continue
        out += body(heading, lines)
        if heading == "COMMANDS":
            for name in commands(lines):
                out += command_page(prog, name, args.omit)
    others = [p for p in args.see_also if not p.startswith(args.name + "(")]
    out += [".SH SEE ALSO", ",\n".join(".BR %s (%s)" % tuple(p[:-1].split("(")) for p in others)]
    return "\n".join(x for x in out if x != "") + "\n"


def main():
    ap = argparse.ArgumentParser(description="a man page from a program's --help")
    ap.add_argument("--name", required=True)
    ap.add_argument("--section", required=True)
    ap.add_argument("--see-also", action="append", default=[], metavar="PAGE(N)")
    ap.add_argument("--omit", action="append", default=[], metavar="HEADING",
                    help="leave out this part of every COMMAND --help (e.g. the options the page "
                    "describes once)")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("prog", nargs="+")
    args = ap.parse_args()
    text = page(args)
    tmp = args.output + ".tmp"
    os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
