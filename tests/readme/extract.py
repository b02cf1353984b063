#!/usr/bin/env python3
"""Writes every C, Python and Java code block of the given Markdown files to
OUT as a program, pointed at the test's Redis, and prints one line per block:
"<lang> <path> <source>:<line>", or "fragment <name> <source>:<line>" for a
block marked as a fragment by the line before its fence:

    <!-- fragment: NAME (why) -->

Blocks of other languages (sh, text...) are not programs and are not run.
Usage: extract.py OUT REDIS_HOSTPORT FILE.md..."""
import os
import re
import sys

LANGS = {"c": "c", "python": "py", "java": "java"}
FENCE = re.compile(r"^```(\w*)\s*$")
FRAGMENT = re.compile(r"^<!--\s*fragment:\s*([\w.-]+)")


def blocks(path):
    """(lang, first line number, text, fragment name or None) per fenced block."""
    lines = open(path, encoding="utf-8").read().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or not m.group(1):
            i += 1
            continue
        before = lines[i - 1] if i else ""
        frag = FRAGMENT.match(before)
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1
        yield m.group(1), start + 1, "\n".join(body) + "\n", frag.group(1) if frag else None


def main():
    out, hostport, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    for path in files:
        stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
        for lang, line, text, fragment in blocks(path):
            if lang not in LANGS:
                continue
            where = "%s:%d" % (path, line)
            if fragment:
                print("fragment", fragment, where)
                continue
            # the examples name the usual local Redis; the test runs its own
            text = text.replace("127.0.0.1:6379", hostport)
            name = "%s_%d" % (stem, line)
            if lang == "java":
                cls = re.search(r"^public class (\w+)", text, re.M)
                if not cls:
                    sys.exit("%s: a Java block must be a program (public class with main) or a marked fragment" % where)
                os.makedirs(os.path.join(out, name), exist_ok=True)
                dest = os.path.join(out, name, cls.group(1) + ".java")
            else:
                dest = os.path.join(out, name + "." + LANGS[lang])
            with open(dest, "w", encoding="utf-8") as f:
                f.write(text)
            print(lang, dest, where)


if __name__ == "__main__":
    main()
