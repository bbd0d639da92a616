"""The demo's reward program (rlhf.reward_command): one JSON object per line on stdin,
{"prompt": ..., "completion": ..., "answer": ...}; prints 1 when the completion is the
answer exactly (whitespace trimmed), else 0, one number per line, flushed at once."""
import json
import sys

for line in sys.stdin:
    o = json.loads(line)
    print(1.0 if o["completion"].strip() == o["answer"].strip() else 0.0, flush=True)
