"""Text for bench/zeropp.sh's pretraining comparison: the fortunes of Debian's `fortunes`
package, one JSONL document each, shuffled (fixed seed), 1 in 20 held out; corpus.txt for
spm_train."""
import glob
import json
import os
import random
import sys

out, src = sys.argv[1], "/usr/share/games/fortunes"
docs = []
for path in sorted(glob.glob(src + "/*")):
    if "." in os.path.basename(path) or os.path.isdir(path):  # .dat indexes, .u8 copies
        continue
    with open(path, encoding="utf-8", errors="replace") as f:
        docs += [d.strip("\n") for d in f.read().split("\n%\n") if d.strip()]
random.Random(1).shuffle(docs)
held = len(docs) // 20
for name, part in (("valid", docs[:held]), ("train", docs[held:])):
    with open(f"{out}/{name}.jsonl", "w") as f:
        for d in part:
            f.write(json.dumps({"text": d}) + "\n")
with open(f"{out}/corpus.txt", "w") as f:
    f.write("\n".join(docs[held:]) + "\n")
print(f"{len(docs) - held} training and {held} held-out fortunes from {src}")
