"""Makes the built-in demo's data (scripts/demo.sh): a chat task whose answers can be
checked exactly — reverse a random word of 3 to 6 letters, asked in a few phrasings.
Held-out words never appear in training; guessing a word of k letters right has
probability 26^-k (under 1 in 17,000)."""
import json
import random
import sys

out = sys.argv[1]
r = random.Random(1)
letters = "abcdefghijklmnopqrstuvwxyz"
asks = ["reverse %s", "%s backwards?", "spell %s in reverse"]
seen = set()


def examples(n):
    rows = []
    while len(rows) < n:
        w = "".join(r.choice(letters) for _ in range(r.randint(3, 6)))
        if w in seen:
            continue
        seen.add(w)
        question = r.choice(asks) % w
        rows.append({"messages": [{"role": "user", "content": question}, {"role": "assistant", "content": w[::-1]}]})
    return rows


for name, n in (("train", 6000), ("valid", 200)):
    with open("%s/%s.jsonl" % (out, name), "w") as f:
        for e in examples(n):
            f.write(json.dumps(e) + "\n")
# the tokenizer's training text: every character the conversations use
with open(out + "/corpus.txt", "w") as f:
    for line in open(out + "/train.jsonl"):
        for m in json.loads(line)["messages"]:
            f.write(m["content"] + "\n")
