"""Share of samples per Python frame in a `py-spy record -f raw` file (a frame counted once per stack).

    py-spy record -p PID -d 60 -r 20 --nonblocking -f raw -o spy.txt && python spy_summary.py spy.txt
"""
import sys
from collections import Counter

counts, total = Counter(), 0
for line in open(sys.argv[1]):
    stack, n = line.rsplit(" ", 1)
    total += int(n)
    for frame in dict.fromkeys(f.split(" (")[0] + " " + f.rsplit("/", 1)[-1].rstrip(")") for f in stack.split(";")):
        counts[frame] += int(n)
print(f"{total} samples")
for frame, n in counts.most_common(40):
    print(f"{100 * n / total:5.1f}%  {frame}")
