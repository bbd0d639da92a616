#!/usr/bin/env bash
# The layering of docs/layers.txt: every include in the tree points down the module order
# (scripts/check_layers.py), and the check does catch an include that points up and a
# folder the list does not name.
# kernel levels: own only (what it checks does not depend on the CPU kernels)
. "$(dirname "$0")/lib.sh"

if out=$($PY "$ROOT/scripts/check_layers.py" "$ROOT" 2>&1); then say "ok - $out"; else fail "layering"; say "$out"; fi

# a small tree: lib/a below lib/b
mkdir -p t/docs t/lib/a t/lib/b
printf 'lib/a\nlib/b\n' > t/docs/layers.txt
printf '#include "lib/a/a.h"\n' > t/lib/b/b.c
printf 'int a;\n' > t/lib/a/a.h
$PY "$ROOT/scripts/check_layers.py" t >/dev/null && say "ok - an include that points down passes" || fail "a downward include is refused"
printf 'int b;\n' > t/lib/b/b.h
printf '#include "lib/b/b.h"\n' > t/lib/a/a.c
out=$($PY "$ROOT/scripts/check_layers.py" t 2>&1)
[ $? = 1 ] && echo "$out" | grep -q 'lib/a/a.c:1: includes lib/b/b.h: lib/b is above lib/a' \
  && say "ok - an include that points up is named" || fail "upward include: $out"
rm t/lib/a/a.c; mkdir -p t/lib/c && printf 'int c;\n' > t/lib/c/c.c
out=$($PY "$ROOT/scripts/check_layers.py" t 2>&1)
[ $? = 1 ] && echo "$out" | grep -q 'lib/c/c.c: its folder lib/c is not in docs/layers.txt' \
  && say "ok - a folder the list does not name is refused" || fail "unlisted folder: $out"
done_testing
