"""Makes zt rlhf's data from the demo's chat data (scripts/demo_data.py), in the same
directory: the task is still to reverse a word, and its answers can be checked exactly.
  pref_{train,valid}.jsonl    {"prompt": [user turn], "chosen": right answer, "rejected": a wrong one}
  prompts_{train,valid}.jsonl {"prompt": [user turn], "answer": right answer} (for grpo/ppo with
                              scripts/demo_reward.py, which scores completions against "answer")
A wrong answer is the word not reversed, or another word of the same length."""
import json
import random
import sys

d = sys.argv[1]
r = random.Random(2)
letters = "abcdefghijklmnopqrstuvwxyz"


def wrong(answer):
    if r.random() < 0.5 and answer[::-1] != answer:
        return answer[::-1]
    while True:
        w = "".join(r.choice(letters) for _ in answer)
        if w != answer:
            return w


for split in ("train", "valid"):
    with open("%s/%s.jsonl" % (d, split)) as f, open("%s/pref_%s.jsonl" % (d, split), "w") as pref, \
            open("%s/prompts_%s.jsonl" % (d, split), "w") as prompts:
        for line in f:
            user, assistant = json.loads(line)["messages"]
            answer = assistant["content"]
            pref.write(json.dumps({"prompt": [user], "chosen": answer, "rejected": wrong(answer)}) + "\n")
            prompts.write(json.dumps({"prompt": [user], "answer": answer}) + "\n")
