#!/usr/bin/env python3
"""Fails on an #include that points up the module order of docs/layers.txt.

usage: scripts/check_layers.py [ROOT]   (ROOT: the tree to check, default the repository)

Every C, C++ and CUDA file under the listed modules is read; an include "X" names the file
beside the including one when that exists, else X from the root. An include of a module listed
later than the including file's own (pointing up) is an error, as is a source file in a folder
the list does not name. Headers outside the tree (<...>, or not found) are not checked.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE = re.compile(r'\.(c|h|cc|cu|cuh)$')


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..'))
    listing = os.path.join(root, 'docs', 'layers.txt')
    order = [l.strip() for l in open(listing) if l.strip() and not l.startswith('#')]
    rank = {m: i for i, m in enumerate(order)}
    errors = []
    for top in sorted({m.split('/')[0] for m in order}):
        for d, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not SOURCE.search(name):
                    continue
                path = os.path.relpath(os.path.join(d, name), root)
                module = os.path.dirname(path)
                if module not in rank:
                    errors.append(f'{path}: its folder {module} is not in docs/layers.txt')
                    continue
                text = open(os.path.join(root, path), encoding='utf-8', errors='replace').read()
                for m in INCLUDE.finditer(text):
                    inc = m.group(1)
                    beside = os.path.normpath(os.path.join(module, inc))
                    target = beside if os.path.isfile(os.path.join(root, beside)) else os.path.normpath(inc)
                    if not os.path.isfile(os.path.join(root, target)):
                        continue
                    to = os.path.dirname(target)
                    line = text.count('\n', 0, m.start()) + 1
                    if to not in rank:
                        errors.append(f'{path}:{line}: includes {target}, in {to}, which docs/layers.txt does not list')
                    elif rank[to] > rank[module]:
                        errors.append(f'{path}:{line}: includes {target}: {to} is above {module} in docs/layers.txt')
    for e in errors:
        print(e)
    if errors:
        sys.exit(1)
    print(f'layers: {len(order)} modules, every include points down')


if __name__ == '__main__':
    main()
